//! Gemini `streamGenerateContent?alt=sse` streams: GenerateContentResponse chunks, text parts,
//! whole functionCall parts with ids, thoughtSignature, finishReason, usageMetadata.

use crate::common;

use common::{body, post, GEMINI_MODEL};
use serde_json::{json, Value};
use tooljournal_mockllm::{Answer, Format, MockServer, Stop};

const F: Format = Format::Gemini;

fn parts(chunks: &[Value]) -> Vec<&Value> {
    chunks
        .iter()
        .flat_map(|c| c["candidates"][0]["content"]["parts"].as_array().unwrap())
        .collect()
}

#[tokio::test]
async fn text_and_calls_stream_as_generate_content_responses() {
    let server = MockServer::start();
    // Numbers an f64 would change: the args must arrive as the script's own text.
    let args0 = r#"{"n": 12345678901234567890123, "x": 1.10}"#;
    server.push(
        F,
        Answer::text("Two calls coming up.")
            .with_thinking("plan", "c2lnLW9uZQ==")
            .with_call("fc_1", "read_file", args0)
            .with_call("fc_2", "list_dir", r#"{"dir":"."}"#)
            .with_usage(300, 40, 100)
            .with_response_id("resp-gem-1")
            .into(),
    );
    let got = post(&server, F, &body(F)).await;
    assert_eq!(got.status, 200);
    assert!(got.text().contains("\r\n\r\n"), "CRLF-ended lines");
    assert!(got.text().contains(args0), "args verbatim");
    let events = got.events().await;
    assert!(events.iter().all(|e| e.event == "message"));
    let chunks: Vec<Value> = events
        .iter()
        .map(|e| serde_json::from_str(&e.data).unwrap())
        .collect();
    for c in &chunks {
        assert_eq!(c["responseId"], "resp-gem-1");
        assert_eq!(c["modelVersion"], GEMINI_MODEL);
        assert_eq!(c["candidates"][0]["index"], 0);
        assert_eq!(c["candidates"][0]["content"]["role"], "model");
        assert_eq!(c["usageMetadata"]["promptTokenCount"], 300);
    }
    let all = parts(&chunks);
    let text: String = all.iter().filter_map(|p| p["text"].as_str()).collect();
    assert_eq!(text, "Two calls coming up.");
    assert!(all.iter().filter(|p| p.get("text").is_some()).count() >= 3);
    assert!(
        all.iter().all(|p| p.get("thought").is_none()),
        "no thought parts unless includeThoughts"
    );

    let calls: Vec<&Value> = all
        .iter()
        .filter(|p| p.get("functionCall").is_some())
        .copied()
        .collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0]["functionCall"]["id"], "fc_1");
    assert_eq!(calls[0]["functionCall"]["name"], "read_file");
    assert_eq!(calls[0]["functionCall"]["args"]["x"], 1.1);
    assert_eq!(calls[1]["functionCall"]["args"], json!({"dir": "."}));
    // The signature rides on the first functionCall part only.
    assert_eq!(calls[0]["thoughtSignature"], "c2lnLW9uZQ==");
    assert!(calls[1].get("thoughtSignature").is_none());
    assert!(all
        .iter()
        .filter(|p| p.get("text").is_some())
        .all(|p| p.get("thoughtSignature").is_none()));

    // finishReason and the full usage only on the last chunk.
    let (last, rest) = chunks.split_last().unwrap();
    assert_eq!(last["candidates"][0]["finishReason"], "STOP");
    assert_eq!(last["usageMetadata"]["candidatesTokenCount"], 40);
    assert_eq!(last["usageMetadata"]["totalTokenCount"], 340);
    assert_eq!(last["usageMetadata"]["cachedContentTokenCount"], 100);
    assert!(rest
        .iter()
        .all(|c| c["candidates"][0].get("finishReason").is_none()
            && c["usageMetadata"].get("candidatesTokenCount").is_none()));

    let recorded = &server.requests()[0];
    assert_eq!(
        recorded.path,
        format!("/v1beta/models/{GEMINI_MODEL}:streamGenerateContent?alt=sse")
    );
    assert_eq!(recorded.header("x-goog-api-key"), Some("sk-mock-test"));
}

#[tokio::test]
async fn signature_on_text_without_calls_thoughts_when_asked_and_max_tokens() {
    let server = MockServer::start();
    server.push(
        F,
        Answer::text("short")
            .with_thinking("deep thought", "c2ln")
            .with_stop(Stop::Length)
            .into(),
    );
    let mut b = body(F);
    b["generationConfig"] = json!({"thinkingConfig": {"includeThoughts": true}});
    let got = post(&server, F, &b).await;
    let chunks: Vec<Value> = got
        .events()
        .await
        .iter()
        .map(|e| serde_json::from_str(&e.data).unwrap())
        .collect();
    let all = parts(&chunks);
    assert_eq!(all[0]["thought"], true);
    assert_eq!(all[0]["text"], "deep thought");
    assert_eq!(all[1]["text"], "short");
    assert_eq!(all[1]["thoughtSignature"], "c2ln");
    assert_eq!(
        chunks.last().unwrap()["candidates"][0]["finishReason"],
        "MAX_TOKENS"
    );
}

#[tokio::test]
async fn arguments_that_are_not_an_object_are_a_script_error() {
    let server = MockServer::start();
    server.push(F, Answer::calls(vec![("c", "read_file", "[1, 2]")]).into());
    let got = post(&server, F, &body(F)).await;
    assert_eq!(got.status, 500);
    let message = got.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("not an object"), "{message}");
}
