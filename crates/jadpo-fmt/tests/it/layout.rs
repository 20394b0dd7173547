//! The layout, by example: each case is a file in every shape a person may write it,
//! and its formatted text as a snapshot.

use jadpo_fmt::format;

fn fmt(src: &str) -> String {
    let out = format(src).unwrap_or_else(|e| panic!("{e}: {:?}", e.errors));
    assert_eq!(format(&out).as_deref(), Ok(out.as_str()), "not idempotent:\n{out}");
    out
}

#[test]
fn smoke() {
    println!(
        "{}",
        fmt(&std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/payments.jadpo")).unwrap())
    );
}
