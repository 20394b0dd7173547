//! `jadpoc fmt` as a user runs it: in place, `--check` for CI, `-` for editors, and
//! files with syntax errors left untouched.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

const MESSY: &str = "event A {id:string,  n: int // count\n}\nsubscriber s { on: A\n run: f(event.id) retry: {attempts: 3, within: 1h} }\n";
const TIDY: &str = "event A {\n    id: string\n    n: int // count\n}\n\nsubscriber s {\n    on: A\n    run: f(event.id)\n    retry: { attempts: 3, within: 1h }\n}\n";
const BROKEN: &str = "event B {\n    id:\n}\n";

use crate::common::{jadpoc_in as jadpoc, project, text};

fn read(dir: &tempfile::TempDir, name: &str) -> String {
    std::fs::read_to_string(dir.path().join(name)).expect("read")
}

#[test]
fn rewrites_files_in_place_searching_directories_as_check_does() {
    let dir = project(&[("a.jadpo", MESSY), ("sub/b.jadpo", MESSY), ("tidy.jadpo", TIDY), ("notes.txt", MESSY)]);
    let out = jadpoc(dir.path(), &["fmt"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(read(&dir, "a.jadpo"), TIDY);
    assert_eq!(read(&dir, "sub/b.jadpo"), TIDY);
    assert_eq!(read(&dir, "tidy.jadpo"), TIDY);
    assert_eq!(read(&dir, "notes.txt"), MESSY, "only `.jadpo` files are formatted");
    // Nothing is left beside them.
    let mut names: Vec<_> = std::fs::read_dir(dir.path()).expect("ls").flatten().map(|e| e.file_name()).collect();
    names.sort();
    assert_eq!(names, ["a.jadpo", "notes.txt", "sub", "tidy.jadpo"]);
    // A file named on the command line.
    std::fs::write(dir.path().join("a.jadpo"), MESSY).expect("write");
    let out = jadpoc(dir.path(), &["fmt", "a.jadpo"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(read(&dir, "a.jadpo"), TIDY);
    assert!(out.stdout.is_empty() && out.stderr.is_empty());
}

#[test]
fn check_lists_the_files_that_would_change_and_writes_nothing() {
    let dir = project(&[("a.jadpo", MESSY), ("sub/b.jadpo", MESSY), ("tidy.jadpo", TIDY)]);
    let out = jadpoc(dir.path(), &["fmt", "--check", "."]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stdout), "a.jadpo\nsub/b.jadpo\n");
    assert_eq!(read(&dir, "a.jadpo"), MESSY);
    assert_eq!(read(&dir, "sub/b.jadpo"), MESSY);

    let out = jadpoc(dir.path(), &["fmt", "--check", "tidy.jadpo"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());
}

#[test]
fn stdin_to_stdout() {
    let run = |args: &[&str], input: &str| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_jadpoc"))
            .args(args)
            .env("NO_COLOR", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("jadpoc runs");
        // A refused command exits without reading its input: the pipe may be
        // closed before the text is written, which is not the test's concern.
        let _ = child.stdin.take().expect("stdin").write_all(input.as_bytes());
        child.wait_with_output().expect("jadpoc ends")
    };
    let out = run(&["fmt", "-"], MESSY);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout), TIDY);

    let out = run(&["fmt", "--check", "-"], MESSY);
    assert_eq!((out.status.code(), text(&out.stdout)), (Some(1), "-\n".to_string()));
    let out = run(&["fmt", "--check", "-"], TIDY);
    assert_eq!((out.status.code(), text(&out.stdout)), (Some(0), String::new()));

    let out = run(&["fmt", "-"], BROKEN);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "nothing is written for a text that does not parse");
    let stderr = text(&out.stderr);
    assert!(stderr.contains("syntax.unexpected_token") && stderr.contains("<stdin>:3:1"), "{stderr}");

    let out = run(&["fmt", "-", "a.jadpo"], MESSY);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("`-` (stdin) cannot be given with other paths"));
}

#[test]
fn a_file_with_syntax_errors_is_left_untouched_and_the_others_are_formatted() {
    let dir = project(&[("a.jadpo", MESSY), ("broken.jadpo", BROKEN), ("z.jadpo", MESSY)]);
    let out = jadpoc(dir.path(), &["fmt"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(read(&dir, "broken.jadpo"), BROKEN);
    assert_eq!(read(&dir, "a.jadpo"), TIDY);
    assert_eq!(read(&dir, "z.jadpo"), TIDY);
    // Its diagnostics, drawn as `check` draws them, and only the syntax errors.
    let stderr = text(&out.stderr);
    assert!(stderr.contains("syntax.unexpected_token"), "{stderr}");
    assert!(stderr.contains("broken.jadpo:3:1"), "{stderr}");
    assert!(stderr.contains("1 error, 0 warnings in 1 file"), "{stderr}");
    assert!(!stderr.contains("unknown"), "{stderr}");

    // Under `--check` too: listed files and the broken one's errors, exit 1.
    std::fs::write(dir.path().join("a.jadpo"), MESSY).expect("write");
    let out = jadpoc(dir.path(), &["fmt", "--check"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stdout), "a.jadpo\n");
    assert!(text(&out.stderr).contains("syntax.unexpected_token"));
}

#[test]
fn paths_that_cannot_be_read_exit_2() {
    let dir = project(&[("a.jadpo", MESSY)]);
    let out = jadpoc(dir.path(), &["fmt", "missing.jadpo"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("cannot read `missing.jadpo`"), "{}", text(&out.stderr));
    std::fs::write(dir.path().join("bad.jadpo"), b"event \xff {}").expect("write");
    let out = jadpoc(dir.path(), &["fmt"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("is not UTF-8 text"));
    assert_eq!(read(&dir, "a.jadpo"), TIDY, "the readable file is still formatted");
}

#[test]
fn an_over_size_stdin_is_refused_as_an_over_size_file_is() {
    // One byte over the limit, in a sparse file: nothing is written to disk, and
    // neither input is read, since a regular file's length is known beforehand.
    let dir = project(&[]);
    let big = dir.path().join("big.jadpo");
    let len = u64::try_from(jadpo_syntax::MAX_SOURCE_LEN).expect("the limit fits in u64") + 1;
    std::fs::File::create(&big).and_then(|f| f.set_len(len)).expect("a sparse file");
    let limit = format!("is too large: a source may have at most {} bytes", jadpo_syntax::MAX_SOURCE_LEN);

    let out = jadpoc(dir.path(), &["fmt", "big.jadpo"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(text(&out.stderr), format!("jadpoc: `big.jadpo` {limit}\n"));

    let out = Command::new(env!("CARGO_BIN_EXE_jadpoc"))
        .args(["fmt", "-"])
        .env("NO_COLOR", "1")
        .stdin(std::fs::File::open(&big).expect("open"))
        .output()
        .expect("jadpoc runs");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(text(&out.stderr), format!("jadpoc: stdin {limit}\n"));
    assert!(out.stdout.is_empty());
}

#[test]
fn the_examples_are_formatted() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = jadpoc(&root, &["fmt", "--check", "examples"]);
    assert_eq!(out.status.code(), Some(0), "would change:\n{}{}", text(&out.stdout), text(&out.stderr));
}
