//! `imrelay doctor`'s checks of the Matrix channel: the credentials work (`whoami`, or a
//! login), who may answer is set, and for each configured room: the bot is in it (or can
//! join it) and it is not end-to-end encrypted; with `--send-test`, each room gets a test
//! message.

use super::api::ApiError;
use super::session::Session;
use super::settings::MatrixSettings;
use crate::channels::registry::{Check, Doctor};

/// What to do about a failed call, by what the homeserver said.
fn fix_for(e: &ApiError) -> &'static str {
    match e.errcode() {
        "M_UNKNOWN_TOKEN" | "M_MISSING_TOKEN" => {
            "matrix.access_token is not valid on this homeserver: log in as the bot again and copy \
             its access token (Element: Settings → Help & About → Access Token), or set \
             matrix.user and matrix.password instead"
        }
        "M_FORBIDDEN" | "M_USER_DEACTIVATED" => {
            "check matrix.user and matrix.password (the bot account's), and that the account is active"
        }
        _ if e.status().is_none() => {
            "check matrix.api_url (the homeserver's client API, like https://matrix.example.org) \
             and that it is reachable from here"
        }
        _ => "check matrix.api_url and the bot's credentials",
    }
}

/// The checks, in order.
pub(super) async fn checks(s: &MatrixSettings, run: &Doctor) -> Vec<Check> {
    let mut checks = Vec::new();
    let rooms = || s.chats.iter().map(|r| format!("room {r}"));
    // The doctor writes nothing to the store: a login of its own is the plain device.
    let session = match Session::new(s, super::api::DEVICE_ID.to_string()) {
        Ok(session) => session,
        Err(e) => {
            checks.push(Check::fail(
                format!("matrix: cannot set up a client for {:?}: {e}", s.api_url),
                "check matrix.api_url",
            ));
            run.untried("matrix", rooms(), &mut checks);
            return checks;
        }
    };
    let me = match session.call(|c, t| async move { c.whoami(t).await }).await {
        Ok(w) => {
            checks.push(Check::pass(format!(
                "matrix: signed in to {} as {}{}",
                s.base(),
                w.user_id,
                w.device_id
                    .map(|d| format!(" (device {d})"))
                    .unwrap_or_default()
            )));
            w.user_id
        }
        Err(e) => {
            checks.push(Check::fail(
                format!("matrix: cannot sign in to {}: {e}", s.base()),
                fix_for(&e),
            ));
            run.untried("matrix", rooms(), &mut checks);
            return checks;
        }
    };
    if s.approvers.is_empty() {
        checks.push(Check::fail(
            "matrix: matrix.approvers is empty",
            "add the Matrix user ids (\"@alice:example.org\") of the people who may answer, or \
             give them matrix = [...] in [[people]] and name them in a route",
        ));
    } else {
        checks.push(Check::pass(format!(
            "matrix: {} approver(s) may answer",
            s.approvers.len()
        )));
    }
    if s.chats.is_empty() {
        checks.push(Check::fail(
            "matrix: matrix.chats is empty: prompts go only to people a route messages directly",
            "create a room, invite the bot's account to it, and add its id (\"!...:server\") to matrix.chats",
        ));
    }
    let joined = session
        .call(|c, t| async move { c.joined_rooms(t).await })
        .await
        .unwrap_or_default();
    for room in &s.chats {
        room_checks(&session, run, &me, room, joined.contains(room), &mut checks).await;
    }
    checks
}

/// The checks of one configured room: the bot is in it (joining it when invited), it is not
/// encrypted, and with `--send-test` it takes a test message.
async fn room_checks(
    session: &Session,
    run: &Doctor,
    me: &str,
    room: &str,
    joined: bool,
    checks: &mut Vec<Check>,
) {
    if !joined {
        match session
            .call(|c, t| async move { c.join(room, t).await })
            .await
        {
            Ok(_) => checks.push(Check::pass(format!("matrix: joined room {room}"))),
            Err(e) => {
                checks.push(Check::fail(
                    format!("matrix: {me} is not in room {room} and cannot join it: {e}"),
                    format!("invite {me} to the room (Element: Room info → People → Invite)"),
                ));
                run.untried("matrix", [format!("room {room}")], checks);
                return;
            }
        }
    } else {
        checks.push(Check::pass(format!("matrix: {me} is in room {room}")));
    }
    match session
        .call(|c, t| async move { c.is_encrypted(room, t).await })
        .await
    {
        Ok(false) => {}
        Ok(true) => {
            checks.push(Check::fail(
                format!("matrix: room {room} is end-to-end encrypted: imrelay does not post into encrypted rooms yet"),
                "use an unencrypted room for imrelay (encryption cannot be turned off in a room once on): \
                 create one with encryption off and put its id in matrix.chats (docs/matrix.md)",
            ));
            run.untried("matrix", [format!("room {room}")], checks);
            return;
        }
        Err(e) => checks.push(Check::fail(
            format!("matrix: cannot read whether room {room} is encrypted: {e}"),
            fix_for(&e),
        )),
    }
    if run.send_test {
        let content = serde_json::json!({
            "msgtype": "m.notice",
            "body": "A test message from imrelay doctor: imrelay can post here.",
        });
        let txn = format!("imrelay-doctor-{}", jiff::Timestamp::now().as_millisecond());
        let txn = txn.as_str();
        let content = &content;
        match session
            .call(|c, t| async move { c.send(room, "m.room.message", txn, content, t).await })
            .await
        {
            Ok(_) => checks.push(Check::pass(format!(
                "matrix: a test message was posted to room {room}"
            ))),
            Err(e) => checks.push(Check::fail(
                format!("matrix: posting to room {room} failed: {e}"),
                format!("make sure {me} may send messages in the room (its power level)"),
            )),
        }
    }
}
