//! AskUserQuestion interactions: validation and answers in the SDK's shape.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::*;

fn two_questions() -> Value {
    json!({"questions": [
        {"question": "Which color?", "header": "Color", "multiSelect": false,
         "options": [{"label": "Red", "description": "Warm"}, {"label": "Blue", "description": "Cool"}]},
        {"question": "Which toppings?", "header": "Toppings", "multiSelect": true,
         "options": [{"label": "Cheese"}, {"label": "Ham"}, {"label": "Olives"}]}
    ]})
}

async fn create_question(app: &TestApp, id: &str) -> Value {
    let (status, body) = app
        .post(
            "/v1/interactions",
            &json!({"id": id, "tool_name": "AskUserQuestion", "input": two_questions()}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body
}

#[tokio::test]
async fn questions_are_answered_in_the_sdk_shape() {
    let app = spawn_app().await;
    let q = create_question(&app, "q1").await;
    assert_eq!(q["kind"], "question");
    assert_eq!(q["timeout_secs"], 600);

    let (status, body) = app
        .post(
            "/v1/interactions/q1/respond",
            &json!({"answers": {"Which color?": "Blue", "Which toppings?": ["Cheese", "Ham"]}, "by": "carol"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["resolution"]["outcome"], "answered");
    let mut expected = two_questions();
    expected["answers"] = json!({"Which color?": "Blue", "Which toppings?": "Cheese, Ham"});
    assert_eq!(
        body["result"],
        json!({"behavior": "allow", "updatedInput": expected})
    );
}

#[tokio::test]
async fn answers_by_index_joined_labels_and_other_text() {
    let app = spawn_app().await;
    create_question(&app, "q2").await;
    let (status, body) = app
        .post(
            "/v1/interactions/q2/respond",
            &json!({"answers": {"0": "Mauve, obviously", "1": "Olives, Ham"}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["result"]["updatedInput"]["answers"],
        json!({"Which color?": "Mauve, obviously", "Which toppings?": "Olives, Ham"})
    );

    create_question(&app, "q3").await;
    let (status, body) = app
        .post(
            "/v1/interactions/q3/respond",
            &json!({"answers": {"Which color?": "Red", "Which toppings?": ["Cheese", "Pineapple"]}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["result"]["updatedInput"]["answers"]["Which toppings?"],
        "Cheese, Pineapple"
    );
}

#[tokio::test]
async fn declining_a_question_denies_it() {
    let app = spawn_app().await;
    create_question(&app, "q4").await;
    let (status, body) = app
        .post(
            "/v1/interactions/q4/respond",
            &json!({"decision": "deny", "by": "dan"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["resolution"]["outcome"], "denied");
    assert_eq!(body["result"]["behavior"], "deny");
    assert_eq!(
        body["result"]["message"],
        "The question was declined by dan via api"
    );
}

#[tokio::test]
async fn answers_that_do_not_fit_are_400_and_change_nothing() {
    let app = spawn_app().await;
    create_question(&app, "q5").await;
    for bad in [
        json!({"answers": {"Which color?": "Blue"}}),
        json!({"answers": {"Which color?": ["Red", "Blue"], "Which toppings?": "Ham"}}),
        json!({"answers": {"Which color?": "Blue", "Which toppings?": []}}),
        json!({"answers": {"Which color?": "Blue", "Which toppings?": 3}}),
        json!({"answers": {"Which color?": "Blue", "Which toppings?": "Ham", "Who?": "x"}}),
        json!({"answers": "Blue"}),
        json!({"decision": "allow"}),
        json!({"decision": "allow", "answers": {"0": "Red", "1": "Ham"}}),
        json!({}),
    ] {
        let (status, body) = app.post("/v1/interactions/q5/respond", &bad).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad} -> {body}");
        assert_eq!(body["error"]["code"], "invalid_request");
    }
    let (_, still) = app.get("/v1/interactions/q5").await;
    assert_eq!(still["status"], "pending");

    // Answers to an approval are refused too.
    app.create_bash("appr", "ls").await;
    let (status, _) = app
        .post(
            "/v1/interactions/appr/respond",
            &json!({"answers": {"0": "x"}}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}
