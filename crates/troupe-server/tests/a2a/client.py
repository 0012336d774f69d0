"""Drives a troupe server with the reference A2A client (PyPI `a2a-sdk`).

Usage: client.py SCENARIO BASE_URL [--token TOKEN] [--webhook URL] [--dead URL]

Prints one JSON object per line; the Rust test (tests/a2a.rs) asserts on them. A
scenario that fails prints {"event": "error", ...} and exits 1.
"""

import argparse
import asyncio
import json
import sys
import traceback
import uuid

import httpx
from google.protobuf.json_format import MessageToDict

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.compat.v0_3 import types as types_v03
from a2a.helpers import get_artifact_text, get_message_text, new_data_part
from a2a.types.a2a_pb2 import (
    AuthenticationInfo,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)


def emit(event, **fields):
    print(json.dumps({"event": event, **fields}), flush=True)


def state_name(state):
    return TaskState.Name(state)


def describe_task(task):
    return {
        "id": task.id,
        "contextId": task.context_id,
        "state": state_name(task.status.state),
        "status": get_message_text(task.status.message) if task.status.HasField("message") else "",
        "artifacts": {a.artifact_id: get_artifact_text(a) for a in task.artifacts},
        "history": [[Role.Name(m.role), get_message_text(m)] for m in task.history],
    }


def describe(response):
    kind = response.WhichOneof("payload")
    if kind == "task":
        return {"kind": "task", **describe_task(response.task)}
    if kind == "status_update":
        update = response.status_update
        status = update.status
        data = [MessageToDict(p)["data"] for p in status.message.parts if p.WhichOneof("content") == "data"]
        return {
            "kind": "status_update",
            "id": update.task_id,
            "contextId": update.context_id,
            "state": state_name(status.state),
            "status": get_message_text(status.message) if status.HasField("message") else "",
            "data": data,
        }
    if kind == "artifact_update":
        update = response.artifact_update
        return {
            "kind": "artifact_update",
            "id": update.task_id,
            "artifactId": update.artifact.artifact_id,
            "text": get_artifact_text(update.artifact),
            "append": update.append,
            "lastChunk": update.last_chunk,
        }
    return {"kind": kind or "nothing", "text": get_message_text(response.message)}


def message(text=None, parts=None, task_id=None, context_id=None, agent=None):
    msg = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()))
    if text is not None:
        msg.parts.append(Part(text=text))
    for part in parts or []:
        msg.parts.append(part)
    if task_id:
        msg.task_id = task_id
    if context_id:
        msg.context_id = context_id
    if agent:
        msg.metadata.update({"agent": agent})
    return msg


class Session:
    def __init__(self, base, token, webhook=None, dead=None):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.base = base
        self.webhook = webhook
        self.dead = dead
        self.http = httpx.AsyncClient(headers=headers, timeout=30)
        self.card = None

    async def resolve(self):
        # The card is public: fetched without the token.
        async with httpx.AsyncClient(timeout=30) as anonymous:
            self.card = await A2ACardResolver(anonymous, self.base).get_agent_card()
        return self.card

    def client(self, streaming, card=None, bindings=None, push=None):
        config = ClientConfig(streaming=streaming, httpx_client=self.http, push_notification_config=push)
        if bindings:
            config.supported_protocol_bindings = bindings
        return ClientFactory(config).create(card or self.card)

    def rest_client(self, streaming):
        """A client that speaks only the HTTP+JSON binding: it must find it in the card."""
        return self.client(streaming, bindings=["HTTP+JSON"])

    async def send(self, client, msg, label, configuration=None):
        """Sends `msg`, prints every stream item under `label`, returns the last task state seen."""
        request = SendMessageRequest(message=msg)
        if configuration is not None:
            request.configuration.CopyFrom(configuration)
        last = None
        async for response in client.send_message(request):
            item = describe(response)
            emit(label, **item)
            last = item
        return last


async def card_and_answer(session):
    card = await session.resolve()
    emit(
        "card",
        name=card.name,
        streaming=card.capabilities.streaming,
        interfaces=[[i.url, i.protocol_binding, i.protocol_version] for i in card.supported_interfaces],
        skills=[s.id for s in card.skills],
        schemes=list(card.security_schemes.keys()),
    )
    # The same card read as a 0.3 client reads it.
    async with httpx.AsyncClient(timeout=30) as anonymous:
        raw = (await anonymous.get(session.base + "/.well-known/agent-card.json")).json()
    old = types_v03.AgentCard.model_validate(raw)
    emit(
        "card_v03",
        url=old.url,
        protocolVersion=old.protocol_version,
        transport=old.preferred_transport,
        schemes=sorted((old.security_schemes or {}).keys()),
    )
    blocking = session.client(streaming=False)
    await session.send(blocking, message("say hello", agent="coder"), "send")
    streaming = session.client(streaming=True)
    await session.send(streaming, message("say hello again"), "stream")


async def approval(session):
    await session.resolve()
    client = session.client(streaming=True)
    first = await session.send(client, message("write the notes"), "first")
    # The follow-up names the task and approves by text.
    await session.send(client, message("approve", task_id=first["id"], context_id=first["contextId"]), "second")


async def team_approval(session):
    """A served team: a member's call waits, and a follow-up text approves it."""
    await session.resolve()
    client = session.client(streaming=True)
    first = await session.send(client, message("Describe this repository", agent="project"), "first")
    await session.send(client, message("approve", task_id=first["id"], context_id=first["contextId"]), "second")


async def approval_data(session):
    await session.resolve()
    client = session.client(streaming=False)
    first = await session.send(client, message("write nope.md"), "first")
    call_id = first["status"].split("call id `")[1].split("`")[0]
    decision = new_data_part({"approval": "reject", "callId": call_id, "reason": "not that file"})
    await session.send(client, message(parts=[decision], task_id=first["id"]), "second")


async def tasks(session):
    await session.resolve()
    client = session.client(streaming=False)
    done = await session.send(client, message("answer once"), "done")
    task = await client.get_task(GetTaskRequest(id=done["id"], history_length=1))
    emit("get", **describe_task(task))

    waiting = await session.send(client, message("write c.md"), "waiting")
    listed = await client.list_tasks(ListTasksRequest(page_size=1))
    emit(
        "list",
        ids=[t.id for t in listed.tasks],
        next=listed.next_page_token,
        total=listed.total_size,
        pageSize=listed.page_size,
    )
    rest = await client.list_tasks(ListTasksRequest(page_size=1, page_token=listed.next_page_token))
    emit("list_rest", ids=[t.id for t in rest.tasks], next=rest.next_page_token)
    by_state = await client.list_tasks(ListTasksRequest(status=TaskState.TASK_STATE_INPUT_REQUIRED))
    emit("list_waiting", ids=[t.id for t in by_state.tasks])
    by_context = await client.list_tasks(ListTasksRequest(context_id=done["contextId"], include_artifacts=True))
    emit("list_context", tasks=[describe_task(t) for t in by_context.tasks])

    # A subscriber to the waiting task sees it as it stands, then its cancellation.
    streaming = session.client(streaming=True)
    seen = []
    first_seen = asyncio.Event()

    async def follow():
        async for response in streaming.subscribe(SubscribeToTaskRequest(id=waiting["id"])):
            seen.append(describe(response))
            first_seen.set()

    follower = asyncio.create_task(follow())
    await asyncio.wait_for(first_seen.wait(), 10)
    cancelled = await client.cancel_task(CancelTaskRequest(id=waiting["id"]))
    emit("cancel", **describe_task(cancelled))
    await asyncio.wait_for(follower, 10)
    emit("subscribed", items=seen)
    for label, call in [
        ("cancel_again", client.cancel_task(CancelTaskRequest(id=waiting["id"]))),
        ("get_unknown", client.get_task(GetTaskRequest(id="run_does_not_exist"))),
    ]:
        try:
            await call
            emit(label, error=None)
        except Exception as error:  # noqa: BLE001 - the error's type is the point
            emit(label, error=type(error).__name__, message=str(error))
    try:
        async for response in streaming.subscribe(SubscribeToTaskRequest(id=done["id"])):
            emit("subscribe_ended", **describe(response))
        emit("subscribe_ended", error=None)
    except Exception as error:  # noqa: BLE001
        emit("subscribe_ended", error=type(error).__name__, message=str(error))


async def legacy(session):
    card = await session.resolve()
    # Keep only the 0.3 interface: the factory then speaks 0.3 (message/send, …).
    old = type(card)()
    old.CopyFrom(card)
    del old.supported_interfaces[:]
    old.supported_interfaces.extend([i for i in card.supported_interfaces if i.protocol_version == "0.3"])
    emit("legacy_card", versions=[i.protocol_version for i in old.supported_interfaces])
    blocking = session.client(streaming=False, card=old)
    done = await session.send(blocking, message("hello, old client"), "send")
    task = await blocking.get_task(GetTaskRequest(id=done["id"]))
    emit("get", **describe_task(task))
    streaming = session.client(streaming=True, card=old)
    first = await session.send(streaming, message("write old.md"), "stream")
    await session.send(streaming, message("approve", task_id=first["id"]), "stream_second")


async def errors(session):
    url = session.base + "/a2a"
    raw = [
        ("parse", b"{not json", {}),
        ("batch", b"[]", {}),
        ("invalid_request", json.dumps({"jsonrpc": "1.0", "id": 1, "method": "GetTask"}).encode(), {}),
        ("method", json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tasks/nope", "params": {}}).encode(), {}),
        ("params", json.dumps({"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": 5}}).encode(), {}),
        ("no_message", json.dumps({"jsonrpc": "2.0", "id": 4, "method": "SendMessage", "params": {}}).encode(), {}),
        (
            "empty_message",
            json.dumps(
                {"jsonrpc": "2.0", "id": 5, "method": "SendMessage",
                 "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}}}
            ).encode(),
            {},
        ),
        (
            "unknown_skill",
            json.dumps(
                {"jsonrpc": "2.0", "id": 6, "method": "SendMessage",
                 "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}],
                                        "metadata": {"agent": "nobody"}}}}
            ).encode(),
            {},
        ),
        ("version", json.dumps({"jsonrpc": "2.0", "id": 7, "method": "GetTask", "params": {"id": "x"}}).encode(),
         {"A2A-Version": "9.9"}),
        ("push", json.dumps({"jsonrpc": "2.0", "id": 8, "method": "CreateTaskPushNotificationConfig",
                             "params": {}}).encode(), {}),
        ("unknown_task", json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tasks/get",
                                     "params": {"id": "run_none"}}).encode(), {}),
    ]
    for label, body, headers in raw:
        response = await session.http.post(url, content=body, headers={"content-type": "application/json", **headers})
        payload = response.json()
        emit("raw", label=label, status=response.status_code, id=payload.get("id"), error=payload.get("error"))


async def expect_error(label, call):
    """Awaits `call`, printing the error it raises (its type is what the SDK mapped)."""
    try:
        result = await call
        emit(label, error=None, result=MessageToDict(result) if result is not None else None)
    except Exception as error:  # noqa: BLE001 - the error's type is the point
        emit(label, error=type(error).__name__, message=str(error))


async def rest(session):
    """The whole life of tasks over HTTP+JSON only: answers, an approval, reads, a cancel."""
    card = await session.resolve()
    emit("card", interfaces=[[i.url, i.protocol_binding, i.protocol_version] for i in card.supported_interfaces],
         push=card.capabilities.push_notifications)
    blocking = session.rest_client(streaming=False)
    streaming = session.rest_client(streaming=True)
    emit("transports", blocking=type(blocking._transport).__name__, streaming=type(streaming._transport).__name__)
    done = await session.send(blocking, message("say hello"), "send")
    first = await session.send(streaming, message("write the notes"), "first")
    await session.send(streaming, message("approve", task_id=first["id"], context_id=first["contextId"]), "second")
    task = await blocking.get_task(GetTaskRequest(id=done["id"], history_length=1))
    emit("get", **describe_task(task))
    waiting = await session.send(blocking, message("write c.md"), "waiting")
    listed = await blocking.list_tasks(ListTasksRequest(page_size=2))
    emit("list", ids=[t.id for t in listed.tasks], next=listed.next_page_token, total=listed.total_size)
    by_state = await blocking.list_tasks(ListTasksRequest(status=TaskState.TASK_STATE_INPUT_REQUIRED))
    emit("list_waiting", ids=[t.id for t in by_state.tasks])
    by_context = await blocking.list_tasks(ListTasksRequest(context_id=done["contextId"], include_artifacts=True))
    emit("list_context", tasks=[describe_task(t) for t in by_context.tasks])
    cancelled = await blocking.cancel_task(CancelTaskRequest(id=waiting["id"]))
    emit("cancel", **describe_task(cancelled))
    await expect_error("cancel_again", blocking.cancel_task(CancelTaskRequest(id=waiting["id"])))
    await expect_error("get_unknown", blocking.get_task(GetTaskRequest(id="run_does_not_exist")))
    await expect_error("bad_skill", blocking.send_message(SendMessageRequest(message=message("hi", agent="nobody"))).__anext__())
    try:
        async for response in streaming.subscribe(SubscribeToTaskRequest(id=done["id"])):
            emit("subscribe_ended", **describe(response))
        emit("subscribe_ended", error=None)
    except Exception as error:  # noqa: BLE001
        emit("subscribe_ended", error=type(error).__name__, message=str(error))


def config_dict(config):
    return MessageToDict(config)


async def push(session):
    """A webhook set by the client on a waiting task gets its updates to the end; bad
    configs are refused, over both bindings."""
    await session.resolve()
    client = session.rest_client(streaming=False)
    rpc = session.client(streaming=False)
    first = await session.send(client, message("write p.md"), "first")
    config = TaskPushNotificationConfig(
        task_id=first["id"],
        id="hook-1",
        url=session.webhook,
        token="tok-push-123",
        authentication=AuthenticationInfo(scheme="Bearer", credentials="cred-push-456"),
    )
    created = await client.create_task_push_notification_config(config)
    emit("created", config=config_dict(created))
    got = await client.get_task_push_notification_config(
        GetTaskPushNotificationConfigRequest(task_id=first["id"], id="hook-1"))
    emit("got", config=config_dict(got))
    listed = await rpc.list_task_push_notification_configs(ListTaskPushNotificationConfigsRequest(task_id=first["id"]))
    emit("listed", configs=[config_dict(c) for c in listed.configs])

    def bad(url, task_id=None):
        return TaskPushNotificationConfig(task_id=task_id or first["id"], url=url)

    for label, binding, cfg in [
        ("not_http", client, bad("ftp://127.0.0.1/in")),
        ("not_a_url", client, bad("no url here")),
        ("no_url", rpc, bad("")),
        ("unknown_task", client, bad(session.webhook, task_id="run_nobody")),
        ("unreachable", client, bad(session.dead)),
        ("unreachable_rpc", rpc, bad(session.dead)),
    ]:
        await expect_error(label, binding.create_task_push_notification_config(cfg))
    await session.send(client, message("approve", task_id=first["id"]), "second")
    await expect_error("get_unknown_config", client.get_task_push_notification_config(
        GetTaskPushNotificationConfigRequest(task_id=first["id"], id="hook-404")))
    # A second task, whose webhook is deleted before it is decided: nothing is sent for it.
    other = await session.send(client, message("write q.md"), "other")
    await client.create_task_push_notification_config(
        TaskPushNotificationConfig(task_id=other["id"], id="hook-2", url=session.webhook))
    await client.delete_task_push_notification_config(
        DeleteTaskPushNotificationConfigRequest(task_id=other["id"], id="hook-2"))
    after = await rpc.list_task_push_notification_configs(ListTaskPushNotificationConfigsRequest(task_id=other["id"]))
    emit("after_delete", configs=[config_dict(c) for c in after.configs])
    await session.send(client, message("approve", task_id=other["id"]), "other_second")


async def push_on_send(session):
    """A webhook given with the messages themselves (the client's push config, sent with
    each): it is told of the task across its pause, once."""
    await session.resolve()
    config = TaskPushNotificationConfig(url=session.webhook, token="tok-on-send")
    client = session.client(streaming=False, push=config)
    first = await session.send(client, message("write r.md, and tell my webhook"), "first")
    await session.send(client, message("approve", task_id=first["id"]), "send")
    listed = await client.list_task_push_notification_configs(ListTaskPushNotificationConfigsRequest(task_id=first["id"]))
    emit("listed", configs=[config_dict(c) for c in listed.configs])


SCENARIOS = {
    "rest": rest,
    "push": push,
    "push_on_send": push_on_send,
    "card_and_answer": card_and_answer,
    "approval": approval,
    "approval_data": approval_data,
    "tasks": tasks,
    "legacy": legacy,
    "errors": errors,
    "team_approval": team_approval,
}


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("base")
    parser.add_argument("--token")
    parser.add_argument("--webhook")
    parser.add_argument("--dead")
    args = parser.parse_args()
    session = Session(args.base, args.token, args.webhook, args.dead)
    try:
        await SCENARIOS[args.scenario](session)
    except Exception as error:  # noqa: BLE001 - reported to the Rust test
        emit("error", error=type(error).__name__, message=str(error), trace=traceback.format_exc())
        sys.exit(1)
    finally:
        await session.http.aclose()


if __name__ == "__main__":
    asyncio.run(main())
