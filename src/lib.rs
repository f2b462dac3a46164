//! faultline: takes Kubernetes nodes down on purpose and proves, with timestamps,
//! that the cluster reacted the way its owners believe it does.
//!
//! Data flows one way: [`experiment`] (file → validated plan) → `execute` (actions on
//! nodes) → `observe` (API watches → [`timeline`]) → `judge` (expectations → verdicts)
//! → `report` (JUnit, JSON, terminal, HTML).

pub mod cluster;
pub mod experiment;
pub mod observe;
pub mod timeline;
