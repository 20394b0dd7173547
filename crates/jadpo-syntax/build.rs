//! Generates the parser from the workspace's `grammar/jadpo.lalrpop`.

fn main() {
    let manifest = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let grammar_dir = manifest.join("../../grammar");
    let out_dir = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default());
    println!("cargo:rerun-if-changed={}", grammar_dir.join("jadpo.lalrpop").display());
    if let Err(e) =
        lalrpop::Configuration::new().set_in_dir(&grammar_dir).set_out_dir(&out_dir).process_dir(&grammar_dir)
    {
        eprintln!("{e}");
        std::process::exit(1);
    }
}
