mod server;

/// Minimal entry point until the lead's CLI lands: `trellis lsp` only.
#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match std::env::args().nth(1).as_deref() {
        Some("lsp") => {
            tracing_subscriber::fmt()
                .with_writer(std::io::stderr)
                .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
                .init();
            server::serve_stdio().await
        }
        _ => anyhow::bail!("usage: trellis lsp"),
    }
}
