//! The editor support's committed copies, in step with what they copy, so that a
//! checkout works in an editor as it is and `cargo test` catches a stale copy.

use std::path::Path;

#[test]
fn the_vscode_extension_grammar_is_the_textmate_grammar() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let read = |path: &str| std::fs::read(root.join(path)).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    let source = read("grammar/jadpo.tmLanguage.json");
    let copy = read("editors/vscode/syntaxes/jadpo.tmLanguage.json");
    assert!(
        copy == source,
        "editors/vscode/syntaxes/jadpo.tmLanguage.json differs from grammar/jadpo.tmLanguage.json: \
         run `npm run sync-grammar` in editors/vscode and commit the copy"
    );
}
