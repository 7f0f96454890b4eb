// temporary: the server without mimalloc, for heaptrack
use imrelay::app::App;
use imrelay::config::Settings;
#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let settings = Settings::load(None)?;
    let listen = settings.server.listen;
    let app = App::build(settings).await?;
    let listener = tokio::net::TcpListener::bind(listen).await?;
    let shutdown = app.shutdown_token();
    tokio::spawn(async move {
        tokio::signal::ctrl_c().await.ok();
        shutdown.cancel();
    });
    let t = app.shutdown_token();
    tokio::spawn(async move {
        let mut s =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).unwrap();
        s.recv().await;
        t.cancel();
    });
    app.serve(listener).await?;
    Ok(())
}
