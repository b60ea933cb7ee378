//! `docs/spec.md` names, beside every worked example, the test that checks it. Each named test must exist,
//! so that a test renamed or removed cannot leave an example unchecked while the spec says otherwise.

use std::fs;
use std::path::{Path, PathBuf};

/// Every `.rs` file below `dir`, `target` folders left out.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "target" && n != ".git") {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The tests the spec names: each code span right after "test" or "tests" (and after "and" following
/// one), by its last path segment, without the file paths the spec also gives in code spans.
fn named_tests(spec: &str) -> Vec<String> {
    let text = spec.replace('\n', " ");
    let pieces: Vec<&str> = text.split('`').collect();
    let mut names = Vec::new();
    let mut last_was_test = false;
    for i in (1..pieces.len()).step_by(2) {
        let (before, span) = (pieces[i - 1].trim_end(), pieces[i]);
        let names_a_test =
            before.ends_with("test") || before.ends_with("tests") || (last_was_test && before == "and");
        last_was_test = names_a_test && !span.contains('/') && !span.contains(' ');
        if last_was_test {
            names.push(span.rsplit("::").next().unwrap_or(span).to_owned());
        }
    }
    names
}

#[test]
fn every_test_the_spec_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let spec = fs::read_to_string(root.join("docs/spec.md")).unwrap();
    let names = named_tests(&spec);
    assert!(names.len() >= 20, "{names:?}");
    let mut files = Vec::new();
    for krate in [
        "link-phy",
        "link-dl",
        "link-tl",
        "switch-fw",
        "fabric-sim",
        "linkctl",
    ] {
        rust_files(&root.join(krate), &mut files);
    }
    let sources: Vec<String> = files.iter().map(|f| fs::read_to_string(f).unwrap()).collect();
    for name in names {
        let defined = sources
            .iter()
            .any(|s| s.match_indices(&format!("fn {name}(")).next().is_some());
        assert!(
            defined,
            "docs/spec.md names test `{name}`, which no crate defines"
        );
    }
}
