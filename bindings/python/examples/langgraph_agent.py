"""A LangGraph agent whose tool calls are journaled by tooljournal.

Why LangGraph: a graph's tool node gets the whole assistant message's tool calls at once, so
one model answer is one journaled step (``j.step``): the calls run in the model's order,
in parallel where the tools allow it, each call's ``started`` durable before its body runs,
and the results go back to the graph as ``ToolMessage``s paired with the calls' ids. The model
is swapped by ``base_url``: point ``ChatOpenAI`` at OpenAI, at any OpenAI-compatible server, or
(as the tests do) at tooljournal's loopback mock provider ``mockllm``.

The graph (``MessagesState``)::

    START -> agent --(tool calls)--> tools -> agent
                   --(no calls)----> answer -> END

``agent`` calls ``ChatOpenAI(streaming=True)`` bound to the tools; ``tools`` runs the last
assistant message's calls as one ``j.step``; ``answer`` journals the final text (a step with no
calls). The tools (``append_note``, ``list_notes``) are registered with the journal
(``@j.tool``) and declared to the model with the same JSON schemas.

Run against the mock (``cargo build -p tooljournal-mockllm``, then ``target/debug/mockllm
--port 0 --script SCRIPT.json`` prints its base URLs)::

    python langgraph_agent.py --base-url http://127.0.0.1:PORT/v1 \\
        --journal ./journal --workspace ./ws "Write two notes"

After a crash, ``tooljournal.classify(journal)`` tells which calls never started and which may
have run, and ``tooljournal.Journal.resume`` runs again only what never started.
"""

from __future__ import annotations

import argparse
import os
from typing import Any, Dict, List, Optional, Tuple

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, MessagesState, StateGraph

import tooljournal

NOTES_FILE = "notes.txt"
DEFAULT_PROMPT = "Write two notes: 'buy milk' and 'call mom'."


def open_journal(journal: str, workspace: str) -> Tuple[tooljournal.Journal, List[tooljournal.Tool]]:
    """A new session journaled at ``journal``, with the graph's two tools registered (returned
    too, to declare them to the model)."""
    j = tooljournal.Journal.create(journal, workspace=workspace)
    notes = os.path.join(workspace, NOTES_FILE)

    @j.tool(
        "append_note",
        description="Append one note (a line of text) to the notes file.",
        schema={
            "type": "object",
            "properties": {"text": {"type": "string", "description": "The note."}},
            "required": ["text"],
        },
    )
    def append_note(args: Dict[str, Any], ctx: tooljournal.CallContext) -> str:
        text = args["text"]
        if "\n" in text:
            raise ValueError("a note is one line")
        with open(notes, "a", encoding="utf-8") as f:
            f.write(text + "\n")
        return f"noted: {text}"

    @j.tool(
        "list_notes",
        description="List the notes written so far, one per line.",
        schema={"type": "object", "properties": {}},
        read_only=True,
    )
    def list_notes(args: Dict[str, Any], ctx: tooljournal.CallContext) -> str:
        try:
            with open(notes, encoding="utf-8") as f:
                return f.read() or "(no notes)"
        except FileNotFoundError:
            return "(no notes)"

    return j, [append_note, list_notes]


def openai_tools(tools: List[tooljournal.Tool]) -> List[Dict[str, Any]]:
    """The journal's tools as OpenAI function tools: the same names, descriptions, schemas."""
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.schema},
        }
        for t in tools
    ]


def build_graph(j: tooljournal.Journal, llm: Any):
    """The agent graph; ``llm`` is a chat model already bound to the tools."""

    def agent(state: MessagesState) -> Dict[str, List[Any]]:
        return {"messages": [llm.invoke(state["messages"])]}

    def tools(state: MessagesState) -> Dict[str, List[Any]]:
        last = state["messages"][-1]
        assert isinstance(last, AIMessage) and last.tool_calls
        text = last.content if isinstance(last.content, str) and last.content else None
        # One model answer = one journaled step, in the model's order.
        results = j.step(
            [{"id": tc["id"], "name": tc["name"], "arguments": tc["args"]} for tc in last.tool_calls],
            text=text,
        )
        names = {tc["id"]: tc["name"] for tc in last.tool_calls}
        return {
            "messages": [
                ToolMessage(
                    content=r["content"],
                    tool_call_id=r["call_id"],
                    name=names.get(r["call_id"]),
                    status="success" if r["ok"] else "error",
                )
                for r in results
            ]
        }

    def answer(state: MessagesState) -> Dict[str, List[Any]]:
        last = state["messages"][-1]
        j.step([], text=_text(last))  # the final answer goes into the journal's history too
        return {}

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else "answer"

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", tools)
    graph.add_node("answer", answer)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, {"tools": "tools", "answer": "answer"})
    graph.add_edge("tools", "agent")
    graph.add_edge("answer", END)
    return graph.compile()


def _text(message: Any) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


def main(
    base_url: str,
    journal: str,
    workspace: str,
    *,
    prompt: str = DEFAULT_PROMPT,
    model: str = "gpt-4o-mini",
    api_key: Optional[str] = None,
) -> str:
    """Runs ``prompt`` to the end against the model at ``base_url``, journaling every tool
    call at ``journal``; closes the journal and returns the final answer."""
    os.makedirs(workspace, exist_ok=True)
    j, tools = open_journal(journal, workspace)
    try:
        llm = ChatOpenAI(
            model=model,
            base_url=base_url,
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or "sk-mock",
            streaming=True,
            use_responses_api=False,
            max_retries=0,
            timeout=30,
        ).bind_tools(openai_tools(tools))
        app = build_graph(j, llm)
        j.turn(prompt)
        state = app.invoke({"messages": [HumanMessage(prompt)]}, {"recursion_limit": 12})
        return _text(state["messages"][-1])
    finally:
        j.close()


def _cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True, help="the model's OpenAI base URL (…/v1)")
    parser.add_argument("--journal", required=True, help="the journal directory (new)")
    parser.add_argument("--workspace", required=True, help="where the notes file is written")
    parser.add_argument("--model", default="gpt-4o-mini")
    parser.add_argument("--api-key", default=None, help="default: $OPENAI_API_KEY, else sk-mock")
    parser.add_argument("prompt", nargs="?", default=DEFAULT_PROMPT)
    args = parser.parse_args()
    print(
        main(
            args.base_url,
            args.journal,
            args.workspace,
            prompt=args.prompt,
            model=args.model,
            api_key=args.api_key,
        )
    )


if __name__ == "__main__":
    _cli()
