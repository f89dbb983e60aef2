import { expect } from '@jest/globals';
import { type Queue } from 'bullmq';
import { type Redis } from 'ioredis';
import { api, type Fixture } from '../../../../test/support/fixtures.ts';
import { type Harness } from '../../../../test/support/harness.ts';
import { SocketDestroyTimers } from '../../../../test/support/ioredis-timers.ts';

/** Outbox rows, runs created through the API, and queues closed after a suite. */

/** A closed port: nothing listens on TCP port 1 on loopback. */
export const UNREACHABLE_REDIS_URL = 'redis://127.0.0.1:1/0';

/** The dead sockets' timers ioredis arms when the unreachable-Redis test disconnects (see SocketDestroyTimers). */
export const disconnectTimers = new SocketDestroyTimers();

export interface OutboxRow {
  id: string;
  topic: string;
  aggregate_id: string;
  payload: Record<string, string>;
  published_at: string | Date | null;
  publish_attempts: number;
}

/** Creates a run in the fixture's workspace through the harness's API; its id. */
export async function postRunIn(harness: Harness, fixture: Fixture, message: string): Promise<string> {
  const res = await api(harness, 'post', '/runs', fixture.organizationToken, {
    data: {
      type: 'runs',
      attributes: { message },
      relationships: { workspace: { data: { type: 'workspaces', id: fixture.workspaceId } } },
    },
  });
  expect(res.status).toBe(201);
  return res.body.data.id as string;
}

/** A suite's queue emptied and closed, and its connection with it. */
export async function closeQueue(queue: Queue | undefined, redis: Redis | undefined): Promise<void> {
  if (queue) {
    await queue.obliterate({ force: true });
    await queue.close();
  }
  redis?.disconnect();
}
