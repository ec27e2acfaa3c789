// Tests of the generated client against a real running Rollcall server:
// ROLLCALL_URL is its base URL, ROLLCALL_TOKEN an admin's person token
// (e2e/tsrest_e2e_test.go starts one on SQLite and runs these). Handles
// carry a per-run suffix, so a second run against the same server passes.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  connect,
  getAgent,
  getTodo,
  listAgentTodos,
  listAgents,
  listPersons,
  pushTodo,
  vendAgent,
  type Problem,
  type VendInput,
} from '../src/index';

const url = process.env.ROLLCALL_URL ?? '';
const token = process.env.ROLLCALL_TOKEN ?? '';
if (!url || !token) {
  throw new Error('set ROLLCALL_URL and ROLLCALL_TOKEN (an admin person token) to a running server');
}
const rc = connect(url, token);
const run = `${process.pid}-${Date.now().toString(36)}`;

async function vend(handle: string, queues: string[]) {
  const { data, error, response } = await vendAgent({ client: rc, body: { handle, queues } });
  assert.equal(response?.status, 201, JSON.stringify(error));
  assert.ok(data);
  return data;
}

test('the token reads the persons: its owner is an active admin', async () => {
  const v = await vend(`ts-owner-${run}`, ['inbox']);
  const { data, response } = await listPersons({ client: rc });
  assert.equal(response?.status, 200);
  const me = data?.items.find((p) => p.id === v.agent.owner_id);
  assert.ok(me, `owner ${v.agent.owner_id} not among ${JSON.stringify(data?.items)}`);
  assert.equal(me.role, 'admin');
  assert.equal(me.admin, true);
  assert.equal(me.active, true);
  assert.equal(me.deactivated_at, null);
});

test('vend an agent, push a todo, list and read it back', async () => {
  const handle = `ts-worker-${run}`;
  const v = await vend(handle, ['build', 'review']);
  assert.equal(v.agent.handle, handle);
  assert.equal(v.agent.name, handle);
  assert.deepEqual(v.agent.scope.queues, ['build', 'review']);
  assert.equal(v.agent.active, true);
  assert.match(v.credential, /^rca_/);
  assert.equal(v.mcp_url, `${url}/mcp`);
  assert.ok(v.claude_mcp_add.includes(v.credential));

  const got = await getAgent({ client: rc, path: { ref: handle } });
  assert.equal(got.response?.status, 200);
  assert.equal(got.data?.id, v.agent.id);

  const pushed = await pushTodo({
    client: rc,
    path: { ref: handle },
    body: { queue: 'build', title: 'compile the world', payload: { target: 'all', n: 3 }, idempotency_key: 'k1' },
  });
  assert.equal(pushed.response?.status, 201, JSON.stringify(pushed.error));
  const todo = pushed.data!;
  assert.equal(todo.agent_id, v.agent.id);
  assert.equal(todo.queue, 'build');
  assert.equal(todo.title, 'compile the world');
  assert.equal(todo.state, 'pending');
  assert.equal(todo.push_eligible, true);
  assert.equal(todo.created_by, `operator:${v.agent.owner_id}`);
  assert.deepEqual(todo.payload, { target: 'all', n: 3 });

  // The same idempotency key returns the live todo with 200, nothing new.
  const again = await pushTodo({
    client: rc,
    path: { ref: v.agent.id },
    body: { queue: 'build', title: 'compile the world', idempotency_key: 'k1' },
  });
  assert.equal(again.response?.status, 200);
  assert.equal(again.data?.id, todo.id);

  const list = await listAgentTodos({ client: rc, path: { ref: handle }, query: { state: 'pending' } });
  assert.equal(list.response?.status, 200);
  assert.deepEqual(list.data?.items.map((t) => t.id), [todo.id]);
  assert.equal(list.data?.next_cursor, undefined);

  const one = await getTodo({ client: rc, path: { id: todo.id } });
  assert.equal(one.response?.status, 200);
  assert.equal(one.data?.title, 'compile the world');
  assert.equal(one.data?.idempotency_key, 'k1');
});

test('an unknown agent answers a 404 problem document', async () => {
  const ref = `ts-nobody-${run}`;
  const { data, error, response } = await getAgent({ client: rc, path: { ref } });
  assert.equal(data, undefined);
  assert.equal(response?.status, 404);
  assert.match(response?.headers.get('content-type') ?? '', /^application\/problem\+json/);
  const p = error as Problem;
  assert.equal(p.code, 'not_found');
  assert.equal(p.status, 404);
  assert.equal(p.type, 'urn:rollcall:problem:not_found');
  assert.equal(p.detail, `agent "${ref}" not found`);
  assert.equal(p.instance, `/v1/agents/${ref}`);
});

test('throwOnError throws the problem document', async () => {
  await assert.rejects(
    getAgent({ client: rc, path: { ref: `ts-nobody-${run}` }, throwOnError: true }),
    (e: Problem) => e.code === 'not_found' && e.status === 404,
  );
});

test('a member the schema does not list answers 400 unknown_member with its pointer', async () => {
  const body = { handle: `ts-bad-${run}`, queues: ['q'], bogus: 1 } as VendInput;
  const { error, response } = await vendAgent({ client: rc, body });
  assert.equal(response?.status, 400);
  assert.equal(error?.code, 'unknown_member');
  assert.equal(error?.pointer, '/bogus');
  // Bad input changes nothing.
  const got = await getAgent({ client: rc, path: { ref: `ts-bad-${run}` } });
  assert.equal(got.response?.status, 404);
});

test('a wrong token answers 401 unauthenticated', async () => {
  const { error, response } = await listAgents({ client: connect(url, 'rcp_not-a-real-token') });
  assert.equal(response?.status, 401);
  assert.equal(response?.headers.get('www-authenticate')?.startsWith('Bearer'), true);
  assert.equal(error?.code, 'unauthenticated');
});

test('todo lists page with limit and next_cursor', async () => {
  const handle = `ts-pager-${run}`;
  await vend(handle, ['q']);
  const ids: string[] = [];
  for (const title of ['one', 'two', 'three']) {
    const { data, response } = await pushTodo({ client: rc, path: { ref: handle }, body: { queue: 'q', title } });
    assert.equal(response?.status, 201);
    ids.push(data!.id);
  }
  const first = await listAgentTodos({ client: rc, path: { ref: handle }, query: { limit: 2 } });
  assert.equal(first.response?.status, 200);
  assert.deepEqual(first.data?.items.map((t) => t.title), ['one', 'two']);
  const cursor = first.data?.next_cursor;
  assert.ok(cursor, 'a first page of 2 of 3 has a next_cursor');
  const second = await listAgentTodos({ client: rc, path: { ref: handle }, query: { limit: 2, cursor } });
  assert.equal(second.response?.status, 200);
  assert.deepEqual(second.data?.items.map((t) => t.id), [ids[2]]);
  assert.equal(second.data?.next_cursor, undefined);
});
