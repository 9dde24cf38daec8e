//! `trellis-prompt-codegen manifest [ROOT]`: regenerates `manifest.toml`
//! without building the section-owning crate, which refuses to build while
//! its manifest is stale.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    if args.next().as_deref() != Some("manifest") {
        eprintln!("usage: trellis-prompt-codegen manifest [ROOT]");
        return ExitCode::from(2);
    }
    let root = PathBuf::from(args.next().unwrap_or_else(|| "prompts".to_owned()));
    let result = trellis_prompt_codegen::load_library(&root).and_then(|library| {
        trellis_prompt_codegen::manifest::write_manifest(&library).map_err(Into::into)
    });
    match result {
        Ok(_) => {
            println!(
                "wrote {}",
                root.join(trellis_prompt_codegen::manifest::MANIFEST_FILE)
                    .display()
            );
            ExitCode::SUCCESS
        }
        Err(errors) => {
            eprintln!("{errors}");
            ExitCode::FAILURE
        }
    }
}
