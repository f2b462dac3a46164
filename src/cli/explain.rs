//! `faultline explain`: the node failure model against recorded runs (see
//! [`crate::explain`]).

use std::path::PathBuf;

use super::{EXIT_ERROR, EXIT_FAILED, EXIT_OK, ExplainFormat};
use crate::explain::explain as explain_run;
use crate::series::load_all;

/// Explains every run of every record or series named; exit 1 when a deviation is
/// outside the model, 2 when a record cannot be read.
pub(super) fn explain(paths: &[PathBuf], output: ExplainFormat) -> i32 {
    let mut code = EXIT_OK;
    let mut json = Vec::new();
    for path in paths {
        let sets = match load_all(path) {
            Ok(sets) => sets,
            Err(e) => {
                fail!("{e}");
                return EXIT_ERROR;
            }
        };
        for record in sets.iter().flat_map(|s| s.runs()) {
            let explanation = explain_run(record);
            if explanation.unexplained().next().is_some() {
                code = EXIT_FAILED;
            }
            match output {
                ExplainFormat::Text => {
                    crate::report::colour::print_explain(&explanation.render(record))
                }
                ExplainFormat::Json => json.push(serde_json::json!({
                    "run_id": record.run_id,
                    "experiment": record.experiment.name,
                    "explanation": explanation,
                })),
            }
        }
    }
    if output == ExplainFormat::Json {
        match serde_json::to_string_pretty(&json) {
            Ok(text) => println!("{text}"),
            Err(e) => {
                fail!("writing JSON: {e}");
                return EXIT_ERROR;
            }
        }
    }
    code
}
