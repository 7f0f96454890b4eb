//! The model's tests: ids, the wire formats, inputs, canonical JSON and times.

use super::*;
use serde_json::value::RawValue;

#[test]
fn an_input_is_kept_as_compact_text_and_read_back_as_the_same_object() {
    let m = json!({"z": 1, "a": {"y": [1, {"b": "x y"}]}, "m": "<&>"});
    let Value::Object(m) = m else { unreachable!() };
    let input = Input::from_map(&m);
    assert_eq!(
        input.as_json(),
        r#"{"z":1,"a":{"y":[1,{"b":"x y"}]},"m":"<&>"}"#
    );
    assert_eq!(input.map(), m);
    // Written as it is, and read back only as an object.
    assert_eq!(serde_json::to_string(&input).unwrap(), input.as_json());
    let back: Input = serde_json::from_str(input.as_json()).unwrap();
    assert_eq!(back.as_json(), input.as_json());
    for not_an_object in ["[1]", "\"text\"", "3", "null"] {
        assert!(serde_json::from_str::<Input>(not_an_object).is_err());
    }
    // Equal when the object is, whatever the key order.
    let reordered: Input =
        serde_json::from_str(r#"{"m":"<&>","z":1,"a":{"y":[1,{"b":"x y"}]}}"#).unwrap();
    assert_eq!(reordered, input);
    assert_ne!(Input::default(), input);
}

use serde_json::json;

fn raw(text: &str) -> Box<RawValue> {
    serde_json::from_str(text).unwrap()
}

#[test]
fn an_input_sent_as_text_keeps_its_numbers_and_loses_only_whitespace() {
    let sent = "{ \"n\" : 1e2 ,\n\t\"z\": -0, \"big\": 18446744073709551617,\r\n \"s\": \" a\\\" {b} \\\\\" }";
    let input = Input::from_json(&raw(sent)).unwrap();
    assert_eq!(
        input.as_json(),
        r#"{"n":1e2,"z":-0,"big":18446744073709551617,"s":" a\" {b} \\"}"#
    );
    assert_eq!(serde_json::to_string(&input).unwrap(), input.as_json());
    assert_eq!(input.map()["s"], json!(" a\" {b} \\"));
    for not_an_object in ["[1]", "\"{}\"", "3", "null"] {
        let err = Input::from_json(&raw(not_an_object)).unwrap_err();
        assert_eq!(err.field, "input", "{not_an_object}");
    }
}

#[test]
fn a_member_is_set_and_the_rest_keeps_its_text() {
    let input =
        Input::from_json(&raw(r#"{"a": 1e2, "answers": 0, "b": [-0], "answers": 1}"#)).unwrap();
    let answered = input.with_member("answers", &json!({"Q?": "x"}));
    assert_eq!(
        answered.as_json(),
        r#"{"a":1e2,"answers":{"Q?":"x"},"b":[-0]}"#
    );
    let added = Input::from_json(&raw(r#"{"k\u00e9": 5e-1}"#))
        .unwrap()
        .with_member("answers", &json!({}));
    assert_eq!(added.as_json(), r#"{"ké":5e-1,"answers":{}}"#);
    assert_eq!(
        Input::default().with_member("a", &json!(1)).as_json(),
        r#"{"a":1}"#
    );
}

#[test]
fn a_primed_digest_is_the_digest_computed_from_the_text() {
    let Value::Object(m) = json!({"command": "ls", "n": [1, {"b": true, "a": null}]}) else {
        unreachable!()
    };
    let id = InteractionId::parse("x").unwrap();
    let lazy = Interaction::pending(id.clone(), "Bash", Input::from_map(&m), now(), 60);
    let primed = Interaction::pending(id, "Bash", Input::from_map(&m), now(), 60);
    primed.prime_digest(&m);
    assert_eq!(primed.input_digest(), lazy.input_digest());
    assert_eq!(lazy.input_digest().len(), 64);
    let other = Interaction::pending(lazy.id.clone(), "Write", Input::from_map(&m), now(), 60);
    assert_ne!(other.input_digest(), lazy.input_digest());
}

#[test]
fn ids_are_validated() {
    assert!(InteractionId::parse("toolu_01D7FLrfh4GYq7yT1ULFeyMV").is_ok());
    assert!(InteractionId::parse("a.b:c-d_e").is_ok());
    let err = InteractionId::parse("").unwrap_err();
    assert_eq!(err.field, "id");
    assert!(InteractionId::parse("with space").is_err());
    assert!(InteractionId::parse("a/b").is_err());
    // Dot segments: a URL with them is normalized before it is sent.
    assert_eq!(InteractionId::parse(".").unwrap_err().field, "id");
    assert!(InteractionId::parse("..").is_err());
    assert!(InteractionId::parse("...").is_ok());
    assert!(InteractionId::parse(".a").is_ok());
    // ...but one stored by an earlier version is still read back.
    let stored: InteractionId = serde_json::from_str("\"..\"").unwrap();
    assert_eq!(stored.as_str(), "..");
    assert!(InteractionId::parse(&"x".repeat(129)).is_err());
    assert!(InteractionId::parse(&"x".repeat(128)).is_ok());
}

#[test]
fn generated_ids_are_valid_and_distinct() {
    let a = InteractionId::generate();
    let b = InteractionId::generate();
    assert_ne!(a, b);
    assert!(InteractionId::parse(a.as_str()).is_ok());
}

#[test]
fn permission_result_has_the_sdk_shape() {
    let mut input = Map::new();
    input.insert("command".into(), json!("ls"));
    let allow = PermissionResult::Allow {
        updated_input: input.into(),
        updated_permissions: None,
    };
    assert_eq!(
        serde_json::to_value(&allow).unwrap(),
        json!({"behavior":"allow","updatedInput":{"command":"ls"}})
    );
    let text = serde_json::to_string(&allow).unwrap();
    assert_eq!(
        serde_json::from_str::<PermissionResult>(&text).unwrap(),
        allow
    );
    assert!(serde_json::from_str::<PermissionResult>(r#"{"behavior":"allow"}"#).is_err());
    assert!(serde_json::from_str::<PermissionResult>(r#"{"behavior":"deny"}"#).is_err());
    let deny = PermissionResult::Deny {
        message: "no".into(),
        interrupt: false,
    };
    assert_eq!(
        serde_json::to_value(&deny).unwrap(),
        json!({"behavior":"deny","message":"no","interrupt":false})
    );
}

#[test]
fn canonical_json_sorts_keys_at_every_level() {
    let a = json!({"b": [1, {"y": "é\"", "x": null}], "a": true});
    assert_eq!(
        canonical_json(&a),
        r#"{"a":true,"b":[1,{"x":null,"y":"é\""}]}"#
    );
    let reordered = json!({"a": true, "b": [1, {"x": null, "y": "é\""}]});
    assert_eq!(canonical_json(&a), canonical_json(&reordered));
}

#[test]
fn every_time_is_written_with_three_fractional_digits() {
    // Times whose milliseconds end in zeros, which a bare timestamp would drop.
    let created = Timestamp::from_millisecond(1_763_800_579_090).unwrap();
    let id = InteractionId::parse("t").unwrap();
    let i = Interaction::pending(id, "Bash", Input::default(), created, 60);
    let at = Timestamp::from_millisecond(1_763_800_580_000).unwrap();
    let r = i.resolved(crate::interaction::expired(&i, at));
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["created_at"], "2025-11-22T08:36:19.090Z");
    assert_eq!(v["deadline"], "2025-11-22T08:37:19.090Z");
    assert_eq!(v["resolution"]["at"], "2025-11-22T08:36:20.000Z");
    assert_eq!(Millis(at).to_string(), "2025-11-22T08:36:20.000Z");
    // A finer time is not cut.
    let fine = Timestamp::from_nanosecond(1_763_800_580_000_100_000).unwrap();
    assert_eq!(Millis(fine).to_string(), "2025-11-22T08:36:20.0001Z");
    // Read back as the same times.
    let back: Interaction = serde_json::from_value(v).unwrap();
    assert_eq!(back, r);
}

#[test]
fn kind_follows_tool_name() {
    assert_eq!(Kind::of_tool("AskUserQuestion"), Kind::Question);
    assert_eq!(Kind::of_tool("Bash"), Kind::Approval);
    assert_eq!(Kind::of_tool("askuserquestion"), Kind::Approval);
}

#[test]
fn rare_fields_live_behind_one_pointer_allocated_only_when_one_is_set() {
    let id = InteractionId::parse("r").unwrap();
    let mut i = Interaction::pending(id, "Bash", Input::default(), now(), 60);
    // What a pending interaction held in an `Arc` costs: its counts beside it, in the
    // allocator's 192-byte class (BENCHMARKS.md, memory per pending interaction).
    assert!(
        std::mem::size_of::<Interaction>() + 16 <= 192,
        "{} bytes",
        std::mem::size_of::<Interaction>()
    );
    // Setting nothing allocates nothing.
    i.set_title(None);
    i.set_labels(Vec::new());
    i.set_votes(Vec::new());
    assert!(!i.rare.is_allocated());
    let plain = i.clone();
    i.set_title(Some("Deploy".into()));
    i.set_quorum(Quorum::of(Some(2), None));
    i.set_labels(vec!["prod".into()]);
    let at = Timestamp::from_millisecond(1_763_800_580_000).unwrap();
    i.set_escalated_at(Some(at));
    assert!(i.rare.is_allocated());
    assert_eq!(i.title(), Some("Deploy"));
    assert_eq!(i.labels(), [Box::<str>::from("prod")]);
    assert_eq!(i.escalated_at(), Some(at));
    // Written and read back the same, as before the fields moved.
    let v = serde_json::to_value(&i).unwrap();
    assert_eq!(v["title"], "Deploy");
    assert_eq!(v["labels"], json!(["prod"]));
    assert_eq!(v["quorum"], json!({"allow": 2, "deny": 1}));
    assert_eq!(v["votes"], json!([]));
    assert_eq!(v["escalated_at"], "2025-11-22T08:36:20.000Z");
    let back: Interaction = serde_json::from_value(v).unwrap();
    assert_eq!(back, i);
    // Unset again, the box goes, and the interaction equals one that never had it.
    i.set_title(None);
    i.set_quorum(None);
    i.set_labels(Vec::new());
    i.set_escalated_at(None);
    assert!(!i.rare.is_allocated());
    assert_eq!(i, plain);
    let back: Interaction = serde_json::from_value(serde_json::to_value(&plain).unwrap()).unwrap();
    assert!(!back.rare.is_allocated());
}
