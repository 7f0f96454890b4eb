//! The form tests: schemas read or refused, content checked, typed text read.

use super::*;
use serde_json::json;

fn form(schema: Value) -> Result<Form, ValidationError> {
    Form::from_input(&Form::input("Tell me", schema))
}

fn err(schema: Value) -> ValidationError {
    form(schema).expect_err("refused")
}

fn obj(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap()
}

#[test]
fn every_supported_type_parses_in_schema_order() {
    let f = form(json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Your name", "minLength": 1, "maxLength": 50},
            "email": {"type": "string", "format": "email"},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "ratio": {"type": "number"},
            "ok": {"type": "boolean", "default": true},
            "size": {"type": "string", "enum": ["s", "m"], "enumNames": ["Small", "Medium"]},
            "colour": {"type": "string", "oneOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}]},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}, "minItems": 1, "maxItems": 2},
            "pets": {"type": "array", "items": {"anyOf": [{"const": "cat", "title": "Cat"}]}},
            "notes": {"type": "string", "multiline": true, "description": "Anything else"}
        },
        "required": ["name", "age"]
    }))
    .unwrap();
    let names: Vec<_> = f.fields.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "name", "email", "age", "ratio", "ok", "size", "colour", "tags", "pets", "notes"
        ]
    );
    assert!(f.fields[0].required && !f.fields[1].required && f.fields[2].required);
    assert_eq!(f.fields[0].label(), "Your name");
    assert_eq!(f.fields[1].label(), "email");
    assert_eq!(f.field("size").unwrap().options()[1].label, "Medium");
    assert_eq!(f.field("colour").unwrap().options()[0].value, "r");
    assert!(matches!(
        f.field("notes").unwrap().ty,
        FieldType::Text {
            multiline: true,
            ..
        }
    ));
    assert!(matches!(
        f.field("age").unwrap().ty,
        FieldType::Number { integer: true, .. }
    ));
}

#[test]
fn anything_outside_the_subset_is_refused_naming_the_property() {
    let cases = [
        (
            json!({"type": "object", "properties": {"a": {"type": "object", "properties": {}}}}),
            "requestedSchema.properties.a.type",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "$ref": "#/x"}}}),
            "requestedSchema.properties.a.$ref",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "format": "ipv4"}}}),
            "requestedSchema.properties.a.format",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "(unclosed"}}}),
            "requestedSchema.properties.a.pattern",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "integer", "minimum": 5, "maximum": 1}}}),
            "requestedSchema.properties.a.minimum",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "number"}}}}),
            "requestedSchema.properties.a.items.type",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "enum": ["x", "x"]}}}),
            "requestedSchema.properties.a.enum[1]",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "boolean", "default": "yes"}}}),
            "requestedSchema.properties.a.default",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]}),
            "requestedSchema.required[0]",
        ),
        (
            json!({"type": "object", "properties": {}}),
            "requestedSchema.properties",
        ),
        (
            json!({"type": "array", "properties": {"a": {"type": "string"}}}),
            "requestedSchema.type",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": false}),
            "requestedSchema.additionalProperties",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "maxLength": 100000}}}),
            "requestedSchema.properties.a.maxLength",
        ),
        (
            json!({"type": "object", "properties": {"a": {}}}),
            "requestedSchema.properties.a.type",
        ),
    ];
    for (schema, field) in cases {
        assert_eq!(err(schema.clone()).field, field, "{schema}");
    }
    let many: Map<String, Value> = (0..=MAX_FIELDS)
        .map(|n| (format!("f{n}"), json!({"type": "string"})))
        .collect();
    let e = err(json!({"type": "object", "properties": many}));
    assert!(e.message.contains("1 to 20 fields"), "{e}");
    let e =
        Form::from_input(&obj(json!({"requestedSchema": Form::prompt_schema(false)}))).unwrap_err();
    assert_eq!(e.field, "message");
    let e = Form::from_input(&obj(
        json!({"message": "m", "mode": "url", "requestedSchema": Form::prompt_schema(false)}),
    ))
    .unwrap_err();
    assert_eq!(e.field, "mode");
}

#[test]
fn content_is_checked_field_by_field_and_completed_with_defaults() {
    let f = form(json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 2, "pattern": "^[a-z]+$"},
            "age": {"type": "integer", "minimum": 18},
            "when": {"type": "string", "format": "date"},
            "site": {"type": "string", "format": "uri"},
            "mail": {"type": "string", "format": "email"},
            "at": {"type": "string", "format": "date-time"},
            "ok": {"type": "boolean", "default": false},
            "size": {"type": "string", "enum": ["s", "m"]},
            "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 2}
        },
        "required": ["name", "age"]
    }))
    .unwrap();
    let accepted = f.accept(&obj(json!({"age": 30, "name": "ann"}))).unwrap();
    assert_eq!(
        Value::Object(accepted.clone()),
        json!({"name": "ann", "age": 30, "ok": false})
    );
    assert_eq!(
        accepted.keys().collect::<Vec<_>>(),
        ["name", "age", "ok"],
        "in field order"
    );
    let refused = |content: Value| f.accept(&obj(content)).unwrap_err();
    let e = refused(json!({"age": 30}));
    assert_eq!(
        (e.field.as_str(), e.message.as_str()),
        ("content.name", "is required")
    );
    assert_eq!(
        refused(json!({"name": "a", "age": 30})).field,
        "content.name"
    );
    let e = refused(json!({"name": "Ann", "age": 30}));
    assert!(e.message.contains("pattern"), "{e}");
    let e = refused(json!({"name": "ann", "age": 17}));
    assert_eq!(e.message, "must be at least 18");
    assert_eq!(
        refused(json!({"name": "ann", "age": 18.5})).message,
        "must be a whole number"
    );
    assert!(f.accept(&obj(json!({"name": "ann", "age": 18.0}))).is_ok());
    assert_eq!(
        refused(json!({"name": "ann", "age": "30"})).message,
        "expected a whole number, got a string"
    );
    for (field, bad) in [
        ("when", json!("2026-13-01")),
        ("when", json!("25/11/2026")),
        ("site", json!("not a url")),
        ("mail", json!("nobody")),
        ("at", json!("2026-11-25")),
        ("size", json!("xl")),
        ("tags", json!(["a", "z"])),
        ("tags", json!(["a", "a"])),
        ("tags", json!(["a", "b", "c"])),
        ("ok", json!("true")),
    ] {
        let mut c = obj(json!({"name": "ann", "age": 30}));
        c.insert(field.into(), bad.clone());
        let e = f.accept(&c).unwrap_err();
        assert_eq!(e.field, format!("content.{field}"), "{bad}");
    }
    let good = f
        .accept(&obj(json!({"name": "ann", "age": 30, "when": "2026-11-25",
            "site": "https://example.com/x", "mail": "a@b.c", "at": "2026-11-25T17:00:00Z",
            "size": "m", "tags": ["c", "a"], "ok": null})))
        .unwrap();
    assert_eq!(good["ok"], json!(false), "null takes the default");
    assert_eq!(good["tags"], json!(["c", "a"]));
    let e = refused(json!({"name": "ann", "age": 30, "extra": 1}));
    assert_eq!(e.field, "content.extra");
}

#[test]
fn typed_text_is_read_into_the_field_type() {
    let f = form(json!({"type": "object", "properties": {
        "n": {"type": "integer", "minimum": 1, "maximum": 10},
        "x": {"type": "number"},
        "b": {"type": "boolean"},
        "c": {"type": "string", "oneOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}]},
        "m": {"type": "array", "items": {"enum": ["a", "b", "c"]}},
        "t": {"type": "string"}
    }}))
    .unwrap();
    let p = |name: &str, text: &str| f.field(name).unwrap().parse_text(text);
    assert_eq!(p("n", " 7 ").unwrap(), json!(7));
    assert!(p("n", "11").unwrap_err().contains("at most 10"));
    assert!(p("n", "seven").is_err());
    assert_eq!(p("x", "2.5").unwrap(), json!(2.5));
    assert!(p("x", "NaN").is_err());
    assert_eq!(p("b", "Yes").unwrap(), json!(true));
    assert_eq!(p("b", "no").unwrap(), json!(false));
    assert!(p("b", "maybe").is_err());
    assert_eq!(p("c", "green").unwrap(), json!("g"));
    assert_eq!(p("c", "1").unwrap(), json!("r"));
    assert!(p("c", "blue").is_err());
    assert_eq!(p("m", "a, 3").unwrap(), json!(["a", "c"]));
    assert_eq!(p("t", "  keep spaces ").unwrap(), json!("  keep spaces "));
    assert_eq!(f.field("c").unwrap().show(&json!("g")), "Green");
    assert_eq!(f.field("b").unwrap().show(&json!(true)), "Yes");
    assert_eq!(f.field("m").unwrap().show(&json!(["a", "c"])), "a, c");
    assert_eq!(f.field("n").unwrap().hint(), "a whole number from 1 to 10");
}

#[test]
fn a_prompt_is_one_required_text_field() {
    let f = Form::from_input(&Form::input("Favourite colour?", Form::prompt_schema(true))).unwrap();
    assert!(f.is_single_text());
    assert_eq!(f.fields[0].name, PROMPT_FIELD);
    assert!(f.fields[0].required);
    assert_eq!(
        f.accept(&obj(json!({}))).unwrap_err().field,
        "content.answer"
    );
    assert_eq!(
        f.accept(&obj(json!({"answer": ""}))).unwrap_err().message,
        "must not be empty"
    );
    assert_eq!(
        f.summary(&f.accept(&obj(json!({"answer": "blue"}))).unwrap()),
        [("Answer".to_string(), "blue".to_string())]
    );
}

#[test]
fn the_result_has_mcps_shape() {
    let accept = ElicitResult {
        action: ElicitAction::Accept,
        content: Some(obj(json!({"a": 1}))),
        message: None,
    };
    assert_eq!(
        serde_json::to_value(&accept).unwrap(),
        json!({"action": "accept", "content": {"a": 1}})
    );
    let cancel: ElicitResult =
        serde_json::from_value(json!({"action": "cancel", "message": "m"})).unwrap();
    assert_eq!(cancel.action, ElicitAction::Cancel);
    assert_eq!(cancel.content, None);
}
