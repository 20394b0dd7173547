//! Throughput of the front end's phases: lex, parse, check.
//!
//! The input is `JADPO_BENCH_FILE` when set (for instance the output of
//! `gen_program.py --subscribers 50000`), else a program of the same shape generated
//! here with 50,000 subscribers.
//!
//!     cargo bench -p jadpo-check --bench front_end

use divan::counter::BytesCount;
use jadpo_check::{Lower, SourceFile, check};
use jadpo_syntax::lexer::Lexer;
use std::sync::LazyLock;

static SOURCE: LazyLock<String> = LazyLock::new(|| match std::env::var("JADPO_BENCH_FILE") {
    Ok(path) => std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}")),
    Err(_) => generate(50_000),
});

/// A valid program shaped like gen_program.py's: a quarter as many events and
/// actions as subscribers, a connection per hundred.
fn generate(subscribers: usize) -> String {
    let types = ["string", "int", "bool", "float", "time", "string?"];
    let mut out = String::new();
    let (events, conns) = (subscribers / 4, (subscribers / 100).max(1));
    for i in 0..events {
        out.push_str(&format!("event Event{i} {{\n"));
        for j in 0..(i % 5 + 1) {
            out.push_str(&format!("    f{j}: {}\n", types[(i + j) % types.len()]));
        }
        out.push_str("}\n\n");
    }
    for i in 0..conns {
        out.push_str(&format!(
            "connection conn{i} {{\n    url: \"http://127.0.0.1:{}/hooks\"\n    timeout: {}s\n    retry: {{ attempts: 3 }}\n}}\n\n",
            8000 + i,
            i % 30 + 1
        ));
    }
    for i in 0..events {
        let params: Vec<String> = (0..(i % 5 + 1)).map(|j| format!("f{j}: {}", types[(i + j) % types.len()])).collect();
        out.push_str(&format!("action act{i}({}) {{\n    via: conn{}\n}}\n\n", params.join(", "), i % conns));
    }
    for i in 0..subscribers {
        let e = i % events;
        let args: Vec<String> = (0..(e % 5 + 1)).map(|j| format!("event.f{j}")).collect();
        out.push_str(&format!("subscriber sub{i} {{\n    on: Event{e}\n    run: act{e}({})\n", args.join(", ")));
        if i % 3 == 0 {
            out.push_str("    retry: { attempts: 5  within: 2h }\n");
        }
        out.push_str("}\n\n");
    }
    out
}

fn main() {
    divan::main();
}

#[divan::bench(sample_count = 10)]
fn lex(b: divan::Bencher) {
    let src = SOURCE.as_str();
    b.counter(BytesCount::new(src.len())).bench(|| {
        let mut errors = Vec::new();
        Lexer::new(src, &mut errors).count()
    });
}

#[divan::bench(sample_count = 10)]
fn parse(b: divan::Bencher) {
    let src = SOURCE.as_str();
    b.counter(BytesCount::new(src.len())).bench(|| jadpo_syntax::parse(src).file.decls.len());
}

#[divan::bench(sample_count = 10)]
fn check_whole_program(b: divan::Bencher) {
    let files = vec![SourceFile { name: "big.jadpo".into(), text: SOURCE.clone() }];
    b.counter(BytesCount::new(SOURCE.len())).bench(|| check(&files, Lower::No).diagnostics.len());
}
