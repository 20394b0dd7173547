//! How long formatting a large file takes (parse included), and the same for a file
//! already in the canonical layout (what `jadpoc fmt --check` meets in CI).
//!
//! The input is `JADPO_BENCH_FILE` when set (for instance the output of
//! `gen_program.py --subscribers 50000`), else a program of that shape generated
//! here, with comments, in a layout that needs work.
//!
//!     cargo bench -p jadpo-fmt --bench format

use divan::counter::BytesCount;
use std::sync::LazyLock;

static SOURCE: LazyLock<String> = LazyLock::new(|| match std::env::var("JADPO_BENCH_FILE") {
    Ok(path) => std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}")),
    Err(_) => generate(50_000),
});

static FORMATTED: LazyLock<String> =
    LazyLock::new(|| jadpo_fmt::format(&SOURCE).unwrap_or_else(|e| panic!("the input does not parse: {:?}", e.errors)));

/// A quarter as many events and actions as subscribers, a connection per hundred,
/// written tightly and with a comment on most declarations.
fn generate(subscribers: usize) -> String {
    let mut out = String::from("// A generated program.\n\n");
    let (events, conns) = (subscribers / 4, (subscribers / 100).max(1));
    for i in 0..events {
        out.push_str(&format!("// Event {i}.\nevent Event{i} {{ id: string, n: int // the count\n}}\n"));
    }
    for i in 0..conns {
        out.push_str(&format!(
            "connection conn{i} {{ url: \"http://127.0.0.1:{}/hooks\" timeout: {}s retry: {{ attempts: 3 }} }}\n",
            8000 + i,
            i % 30 + 1
        ));
    }
    for i in 0..events {
        out.push_str(&format!("action act{i}(id: string, n: int) {{ via: conn{} }}\n", i % conns));
    }
    for i in 0..subscribers {
        let e = i % events;
        out.push_str(&format!(
            "/* subscriber {i} */ subscriber sub{i} {{ on: Event{e} run: act{e}(event.id, event.n)\n  retry: {{\n attempts: 5\n within: 2h }} }}\n"
        ));
    }
    out
}

fn main() {
    divan::main();
}

#[divan::bench]
fn format(b: divan::Bencher) {
    let src = SOURCE.as_str();
    b.counter(BytesCount::of_str(src)).bench(|| jadpo_fmt::format(divan::black_box(src)).map(|s| s.len()));
}

#[divan::bench]
fn format_already_formatted(b: divan::Bencher) {
    let src = FORMATTED.as_str();
    b.counter(BytesCount::of_str(src)).bench(|| jadpo_fmt::format(divan::black_box(src)).map(|s| s.len()));
}

#[divan::bench]
fn parse_only(b: divan::Bencher) {
    let src = FORMATTED.as_str();
    b.counter(BytesCount::of_str(src)).bench(|| jadpo_syntax::parse(divan::black_box(src)).file.decls.len());
}
