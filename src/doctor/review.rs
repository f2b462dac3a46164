//! The two questions `doctor` and a run's pre-flight ask the API server about their own
//! permissions: may I do this (`SelfSubjectAccessReview`, as `kubectl auth can-i`), and
//! which rules do I hold (`SelfSubjectRulesReview`).

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, ResourceRule, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
    SelfSubjectRulesReview, SelfSubjectRulesReviewSpec,
};
use kube::Client;
use kube::api::{Api, PostParams};

use super::access::Access;

/// One `SelfSubjectAccessReview`.
pub(super) async fn can_i(client: &Client, a: &Access) -> Result<bool, kube::Error> {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some(a.verb.clone()),
                group: Some(a.group.clone()),
                resource: Some(a.resource.clone()),
                subresource: a.subresource.clone(),
                namespace: a.namespace.clone(),
                // RBAC cannot grant `create` by name (the object has none yet).
                name: a.name.clone().filter(|_| a.verb != "create"),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    let answer = Api::<SelfSubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

/// The resource rules the API server reports for the caller: its cluster-wide rules and
/// those of namespace `default` (any namespace carries the cluster-wide ones). Empty when
/// the question fails: callers then keep the refusal they had.
pub(super) async fn my_rules(client: &Client) -> Vec<ResourceRule> {
    let review = SelfSubjectRulesReview {
        spec: SelfSubjectRulesReviewSpec {
            namespace: Some("default".into()),
        },
        ..SelfSubjectRulesReview::default()
    };
    Api::<SelfSubjectRulesReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .ok()
        .and_then(|answer| answer.status)
        .map(|s| s.resource_rules)
        .unwrap_or_default()
}
