//! A comparison as one JSON object, for tools (`faultline compare -o json`): both sides,
//! the tolerance, each experiment's verdicts, figures, transitions, roll stages (node by
//! node) and score, each with both sides' spreads and where now lies, the regressions
//! and the exit code. Times in ms.

use serde_json::{Value, json};

use crate::compare::{Comparison, ExperimentDiff, FigureDiff, Movement, Presence};
use crate::series::Spread;

use super::{regression_rows, side_text, verdicts_text};

/// The comparison as pretty JSON.
pub fn render(cmp: &Comparison) -> String {
    let value = json!({
        "baseline": { "label": cmp.baseline.label, "clusters": side_text(&cmp.baseline) },
        "now": { "label": cmp.now.label, "clusters": side_text(&cmp.now) },
        "changed": cmp.cluster_changes(),
        "tolerance": cmp.tolerance.text(),
        "noise_floor": cmp.tolerance.noise_floor.text(),
        "experiments": cmp.experiments.iter().map(experiment).collect::<Vec<_>>(),
        "regressions": regression_rows(cmp).iter().map(|r| json!({
            "experiment": r.experiment,
            "figure": r.figure,
            "baseline": r.baseline,
            "now": r.now,
            "change": r.change,
        })).collect::<Vec<_>>(),
        "exit_code": cmp.exit_code(),
    });
    serde_json::to_string_pretty(&value).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

fn experiment(e: &ExperimentDiff) -> Value {
    let presence = match e.presence {
        Presence::Both => "both",
        Presence::BaselineOnly => "baseline-only",
        Presence::NowOnly => "now-only",
    };
    json!({
        "name": e.name,
        "presence": presence,
        "runs": { "baseline": e.runs.0, "now": e.runs.1 },
        "expectations": e.expectations.iter().map(|x| json!({
            "name": x.name,
            "baseline": verdicts_text(x.baseline.as_ref()),
            "now": verdicts_text(x.now.as_ref()),
            "change": x.change.word(),
        })).collect::<Vec<_>>(),
        "figures": e.figures.iter().map(figure).collect::<Vec<_>>(),
        "transitions": e.transitions.iter().map(figure).collect::<Vec<_>>(),
        "rolls": e.rolls.iter().map(|r| json!({
            "roll": r.roll,
            "nodes": r.nodes.iter().map(|n| json!({
                "node": n.node,
                "stages": n.stages.iter().map(figure).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "one_side_only": r.one_side_only,
        })).collect::<Vec<_>>(),
        "score": figure(&e.score),
    })
}

fn figure(f: &FigureDiff) -> Value {
    json!({
        "key": f.key,
        "label": f.label,
        "baseline": spread(&f.baseline),
        "now": spread(&f.now),
        "delta": f.delta,
        "delta_pct": f.delta_pct,
        "allowance": f.allowance,
        "movement": movement(f.movement),
        "regressed": f.movement.regressed(),
    })
}

fn spread(s: &Spread) -> Value {
    json!({ "runs": s.runs, "observed": s.observed, "min": s.min, "median": s.median, "max": s.max })
}

/// A movement as one kebab-case word, stable for tools.
fn movement(m: Movement) -> &'static str {
    match m {
        Movement::Within => "within",
        Movement::Worse => "worse",
        Movement::Better => "better",
        Movement::Noise => "noise",
        Movement::Lost => "lost",
        Movement::Appeared => "appeared",
        Movement::Neither => "neither",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_json_parses_and_names_the_node_and_stage_that_got_slower() {
        let runs = |back: [i64; 3]| {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("fixtures/records/kubelet-stop-within-toleration.json");
            let mut record = crate::record::RunRecord::load(&path).expect("record");
            record.rolls = crate::judge::roll_figures(
                &crate::judge::roll_figures::tests::rolled(),
                &crate::judge::roll_figures::tests::roll_timeline(back),
            );
            vec![crate::series::Series::single(record)]
        };
        let cmp = crate::compare::compare(
            &runs([40, 40, 40]),
            &runs([40, 95, 40]),
            &crate::compare::Tolerance::default(),
            ("before", "after"),
        );
        let v: Value = serde_json::from_str(&render(&cmp)).expect("json");
        assert_eq!(v["exit_code"], 1);
        let regressions = v["regressions"].as_array().expect("regressions");
        assert_eq!(regressions.len(), 1, "{regressions:?}");
        assert_eq!(
            regressions[0]["figure"],
            "roll `roll reboots`, w2: Ready again"
        );
        let w2 = &v["experiments"][0]["rolls"][0]["nodes"][1];
        assert_eq!(w2["node"], "w2");
        let back = w2["stages"]
            .as_array()
            .expect("stages")
            .iter()
            .find(|s| s["key"] == "node_ready_again")
            .expect("Ready again");
        assert_eq!(back["movement"], "worse");
        assert_eq!(back["now"]["median"], 95_000.0);
        assert_eq!(back["baseline"]["median"], 40_000.0);
    }
}
