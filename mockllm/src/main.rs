//! `mockllm --port N --script FILE`: serves a JSON script of replies on 127.0.0.1 until
//! killed, printing each request it gets (and the rule it broke, if any), so that a person can
//! point `tooljournal chat` at it.
//!
//! The script: `{"expect_key": "sk-..." (optional), "replies": [{"format": "anthropic",
//! "reply": {"answer": {"text": "hi", "calls": [["call_1", "read_file",
//! "{\"path\":\"a\"}"]], "stop": "tool_use"}}}, {"format": "gemini", "reply": {"status":
//! {"status": 429, "headers": [["retry-after", "1"]], "body": "{}"}}}]}`. Answer fields are
//! those of `tooljournal_mockllm::Answer` (all optional), faults included. `{"context_overflow":
//! {}}` is the format's context-overflow error (`{"in_stream": true}`: openai-responses'
//! failed stream).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use serde::Deserialize;
use tooljournal_mockllm::{Format, MockServer, Reply};

#[derive(Parser)]
#[command(about = "A loopback OpenAI / Anthropic / Gemini streaming server from a script")]
struct Args {
    /// Port on 127.0.0.1 (0: any free port).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// The JSON script of replies.
    #[arg(long)]
    script: PathBuf,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Script {
    #[serde(default)]
    expect_key: Option<String>,
    replies: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    format: String,
    reply: Reply,
}

/// The key to expect, if any, and the replies in order.
type Loaded = (Option<String>, Vec<(Format, Reply)>);

fn load(args: &Args) -> Result<Loaded, String> {
    let path = args.script.display();
    let text = std::fs::read_to_string(&args.script).map_err(|e| format!("{path}: {e}"))?;
    let script: Script = serde_json::from_str(&text).map_err(|e| format!("{path}: {e}"))?;
    let mut replies = Vec::new();
    for (i, entry) in script.replies.into_iter().enumerate() {
        let format: Format = entry
            .format
            .parse()
            .map_err(|e| format!("{path}: replies[{i}]: {e}"))?;
        replies.push((format, entry.reply));
    }
    Ok((script.expect_key, replies))
}

fn main() -> ExitCode {
    let args = Args::parse();
    let (key, replies) = match load(&args) {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("mockllm: {e}");
            return ExitCode::from(2);
        }
    };
    let server = match MockServer::start_on(args.port) {
        Ok(server) => server,
        Err(e) => {
            eprintln!("mockllm: cannot listen on 127.0.0.1:{}: {e}", args.port);
            return ExitCode::FAILURE;
        }
    };
    if let Some(key) = &key {
        server.expect_key(key);
    }
    for (format, reply) in replies {
        server.push(format, reply);
    }
    for format in Format::ALL {
        println!(
            "{format}: base URL {} ({} replies)",
            server.base_url(format),
            server.remaining(format)
        );
    }
    let mut seen = 0;
    loop {
        std::thread::sleep(Duration::from_millis(200));
        let requests = server.requests();
        for r in &requests[seen..] {
            match &r.violation {
                None => println!("{} POST {}", r.format, r.path),
                Some(v) => println!("{} POST {} -> {v}", r.format, r.path),
            }
        }
        seen = requests.len();
    }
}
