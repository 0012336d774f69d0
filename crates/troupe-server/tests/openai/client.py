"""Drives a troupe server with the official OpenAI Python SDK (PyPI `openai`).

Usage: client.py SCENARIO BASE_URL

Prints one JSON object per line; the Rust test (tests/all/openai.rs) asserts on them. A
scenario that fails prints {"event": "error", ...} and exits 1.
"""

import json
import sys
import traceback

import openai


def emit(event, **fields):
    print(json.dumps({"event": event, **fields}), flush=True)


def client(base):
    return openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=60)


def models(c):
    listed = c.models.list()
    emit("models", ids=[m.id for m in listed.data])
    emit("model", id=c.models.retrieve("coder").id)
    try:
        c.models.retrieve("nobody")
        emit("unknown", raised=None)
    except openai.NotFoundError as e:
        emit("unknown", raised="NotFoundError", code=e.code)


def chat(c):
    raw = c.chat.completions.with_raw_response.create(
        model="coder",
        messages=[
            {"role": "system", "content": "Answer in one line."},
            {"role": "user", "content": "What is 2 + 2?"},
            {"role": "assistant", "content": "Let me think."},
            {"role": "user", "content": [{"type": "text", "text": "Say it now."}]},
        ],
    )
    completion = raw.parse()
    choice = completion.choices[0]
    emit(
        "chat",
        content=choice.message.content,
        role=choice.message.role,
        finish_reason=choice.finish_reason,
        usage=completion.usage.model_dump(),
        run_id=raw.headers.get("x-troupe-run-id"),
        object=completion.object,
    )


def chat_stream(c):
    stream = c.chat.completions.create(
        model="coder",
        messages=[{"role": "user", "content": "Stream it."}],
        stream=True,
        stream_options={"include_usage": True},
    )
    deltas, finish, usage = [], None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage.model_dump()
        for choice in chunk.choices:
            if choice.delta.content:
                deltas.append(choice.delta.content)
            if choice.finish_reason:
                finish = choice.finish_reason
    emit("chat_stream", deltas=deltas, finish_reason=finish, usage=usage)


def responses(c):
    response = c.responses.create(model="coder", input="What is 2 + 2?", instructions="Answer in one line.")
    emit(
        "responses",
        text=response.output_text,
        status=response.status,
        usage=response.usage.model_dump() if response.usage else None,
        id=response.id,
    )


def responses_stream(c):
    kinds, text, completed = [], [], None
    with c.responses.stream(model="coder", input=[{"role": "user", "content": "Stream it."}]) as stream:
        for event in stream:
            kinds.append(event.type)
            if event.type == "response.output_text.delta":
                text.append(event.delta)
        completed = stream.get_final_response()
    emit("responses_stream", kinds=kinds, text="".join(text), final=completed.output_text, status=completed.status)


def refusals(c):
    cases = {
        "unknown_model": lambda: c.chat.completions.create(model="nobody", messages=[{"role": "user", "content": "hi"}]),
        "empty": lambda: c.chat.completions.create(model="coder", messages=[]),
        "tool_role": lambda: c.chat.completions.create(
            model="coder",
            messages=[{"role": "user", "content": "hi"}, {"role": "tool", "content": "x", "tool_call_id": "c"}],
        ),
        "image": lambda: c.chat.completions.create(
            model="coder",
            messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}],
        ),
        "responses_unknown_model": lambda: c.responses.create(model="nobody", input="hi"),
        "last_not_user": lambda: c.chat.completions.create(
            model="coder", messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
        ),
    }
    for name, call in cases.items():
        try:
            call()
            emit("refusal", case=name, raised=None)
        except openai.APIStatusError as e:
            emit("refusal", case=name, raised=type(e).__name__, status=e.status_code, code=e.code, message=e.message)


def failed(c):
    try:
        c.chat.completions.create(model="coder", messages=[{"role": "user", "content": "hi"}])
        emit("failed", raised=None)
    except openai.APIStatusError as e:
        emit("failed", raised=type(e).__name__, status=e.status_code, code=e.code, message=e.message)


def approval(c):
    completion = c.chat.completions.create(model="coder", messages=[{"role": "user", "content": "Write the notes."}])
    extra = completion.model_extra or {}
    emit("approval", content=completion.choices[0].message.content, troupe=extra.get("troupe"))


SCENARIOS = {
    "models": models,
    "chat": chat,
    "chat_stream": chat_stream,
    "responses": responses,
    "responses_stream": responses_stream,
    "refusals": refusals,
    "approval": approval,
    "failed": failed,
}


def main():
    scenario, base = sys.argv[1], sys.argv[2]
    try:
        SCENARIOS[scenario](client(base))
    except Exception as e:  # the test shows what went wrong
        emit("error", type=type(e).__name__, message=str(e), trace=traceback.format_exc())
        sys.exit(1)


if __name__ == "__main__":
    main()
