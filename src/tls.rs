//! The TLS client settings every outgoing `https://` and `wss://` connection of imrelay
//! uses that does not come with its own (the long connections of Feishu, Slack, DingTalk
//! and WeCom, and the MCP bridge's HTTP client): the ring provider and the Mozilla roots,
//! with no process-wide default provider needed. Imports nothing from the crate.

use std::sync::Arc;

/// The TLS client settings: the ring provider, its safe default protocol versions and the
/// Mozilla roots.
pub fn client_config() -> Result<Arc<rustls::ClientConfig>, rustls::Error> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_settings_build_with_the_mozilla_roots() {
        let config = super::client_config().expect("TLS settings");
        assert!(config.alpn_protocols.is_empty());
        assert!(!webpki_roots::TLS_SERVER_ROOTS.is_empty());
    }
}
