//! What a card button carries: the MAC that binds it to exactly one interaction (its id and
//! creation time) and one action, under the server's persistent `feishu-callback` secret.
//! Compared in constant time.

use super::crypto::ct_eq_str;

/// Bytes of the button MAC kept (128 bits).
const TAG_BYTES: usize = 16;

/// The MAC that binds button data to one interaction (its id and creation time in
/// milliseconds: an id used again after the first interaction was pruned is another
/// interaction) and one action, under the server's persistent `feishu-callback` secret.
pub(crate) fn button_tag(
    secret: &[u8],
    interaction_id: &str,
    created_ms: i64,
    action: &str,
) -> String {
    tag(
        secret,
        b"imrelay/feishu/button/v2",
        &[
            interaction_id.as_bytes(),
            created_ms.to_string().as_bytes(),
            action.as_bytes(),
        ],
    )
}

/// The MAC of buttons posted before they carried the creation time: id and action only.
fn legacy_button_tag(secret: &[u8], interaction_id: &str, action: &str) -> String {
    tag(
        secret,
        b"imrelay/feishu/button/v1",
        &[interaction_id.as_bytes(), action.as_bytes()],
    )
}

/// The channels' one signed token ([`crate::channels::token::Signer`]) over `parts` under
/// `domain`, cut to [`TAG_BYTES`].
fn tag(secret: &[u8], domain: &[u8], parts: &[&[u8]]) -> String {
    crate::channels::token::Signer::new(secret.to_vec()).tag(domain, parts, TAG_BYTES)
}

/// Whether `tag` is the MAC of (`interaction_id`, `created_ms`, `action`), or for a button
/// without a creation time (`None`) of (`interaction_id`, `action`); compared in constant
/// time.
pub(crate) fn verify_button_tag(
    secret: &[u8],
    interaction_id: &str,
    created_ms: Option<i64>,
    action: &str,
    tag: &str,
) -> bool {
    let expected = match created_ms {
        Some(ms) => button_tag(secret, interaction_id, ms, action),
        None => legacy_button_tag(secret, interaction_id, action),
    };
    ct_eq_str(&expected, tag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn button_tags_bind_id_creation_time_and_action() {
        let s = [7u8; 32];
        let at = Some(1_700_000_000_000);
        let t = button_tag(&s, "toolu_1", 1_700_000_000_000, "allow");
        assert!(verify_button_tag(&s, "toolu_1", at, "allow", &t));
        assert!(!verify_button_tag(&s, "toolu_1", at, "deny", &t));
        assert!(!verify_button_tag(&s, "toolu_2", at, "allow", &t));
        assert!(!verify_button_tag(
            &s,
            "toolu_1",
            Some(1_700_000_000_001),
            "allow",
            &t
        ));
        assert!(!verify_button_tag(&s, "toolu_1", None, "allow", &t));
        assert!(!verify_button_tag(&[8u8; 32], "toolu_1", at, "allow", &t));
        assert!(!verify_button_tag(&s, "toolu_1", at, "allow", ""));
        // Buttons from before the creation time was bound: id and action only.
        let old = legacy_button_tag(&s, "toolu_1", "allow");
        assert!(verify_button_tag(&s, "toolu_1", None, "allow", &old));
        assert!(!verify_button_tag(&s, "toolu_1", at, "allow", &old));
        assert!(!verify_button_tag(&s, "toolu_1", None, "deny", &old));
    }
}
