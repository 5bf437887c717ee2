// The cloud as it was at a log position, from the log itself (the audit API's as_of): a project's
// quota usage (GET /v2.1/stratus/usage/<project>?as_of=) and the whole cloud's capacity, summed
// over the hosts' past states (GET /v2.1/stratus/state/host/<name>?as_of=). Past states never
// change, so each answer is kept, for the token it was asked with (another user signing in to this
// tab asks again: what one may see is not what the other may).

import { get, session } from "./api.js";
import { EventStream } from "./events.js";

const kept = new Map();

function once(path) {
  const key = `${session().token}\n${path}`;
  if (!kept.has(key)) {
    const asked = get(path);
    asked.catch(() => kept.delete(key));
    kept.set(key, asked);
  }
  return kept.get(key);
}

const HEAD_TRIES = 30; // a second each: the stream tells the log's position (only writes' answers do)

// The last position of the log the page knows: the event stream's.
export async function headPosition(context) {
  for (let i = 0; i < HEAD_TRIES; i += 1) {
    if (await context.began()) {
      return context.position();
    }
  }
  throw new Error("The log's position is unknown: the event stream (stratus watch) does not answer.");
}

export async function projectUsageAt(projectId, position) {
  return (await once(`/v2.1/stratus/usage/${projectId}?as_of=${position}`)).usage;
}

// The compute hosts' names (hosts registered since are added; a past position asks each).
export async function hostNames() {
  const body = await get("/v2.1/os-hypervisors/detail");
  return body.hypervisors.map((hv) => hv.hypervisor_hostname);
}

async function hostAt(name, position) {
  try {
    return (await once(`/v2.1/stratus/state/host/${encodeURIComponent(name)}?as_of=${position}`)).state;
  } catch (e) {
    if (e.status === 404) {
      return null; // not registered yet at that position
    }
    throw e;
  }
}

// {hosts, vcpus, vcpus_used, memory_mb, memory_mb_used, disk_gb, disk_gb_used, servers} at ``position``.
export async function capacityAt(names, position) {
  const states = await Promise.all(names.map((name) => hostAt(name, position)));
  const total = { hosts: 0, vcpus: 0, vcpus_used: 0, memory_mb: 0, memory_mb_used: 0, disk_gb: 0, disk_gb_used: 0, servers: 0 };
  for (const s of states) {
    if (!s) {
      continue;
    }
    total.hosts += 1;
    total.vcpus += s.vcpus;
    total.memory_mb += s.memory_mb;
    total.disk_gb += s.disk_gb;
    for (const claim of Object.values(s.claims || {})) {
      total.servers += 1;
      total.vcpus_used += claim.vcpus;
      total.memory_mb_used += claim.memory_mb;
      total.disk_gb_used += claim.disk_gb;
    }
  }
  return total;
}

// ``count`` positions from 1 to ``head``, evenly spread, the last being ``head``.
export function samples(head, count) {
  const n = Math.max(1, Math.min(count, head));
  const out = [];
  for (let i = 1; i <= n; i += 1) {
    out.push(Math.max(1, Math.round((head * i) / n)));
  }
  return [...new Set(out)];
}

const EVENT_WAIT_MS = 3000; // for the first event after a position, once the replay is done

// The first event the user's stream shows at or after ``position`` ({position, time}), or null when
// none comes in time (none after it that this user may see). Kept, as the log never changes.
function eventFrom(eventsUrl, position) {
  const key = `${session().token}\nevent ${position}`;
  if (!kept.has(key)) {
    kept.set(key, new Promise((resolve) => {
      const stream = new EventStream(`${eventsUrl}?after=${position - 1}`, {
        onEvent: (event) => {
          if (event.type !== "stratus.stream.started") {
            done({ position: event.position, time: event.time });
          }
        },
        onPosition: () => {},
      });
      const timer = setTimeout(() => done(null), EVENT_WAIT_MS);
      function done(found) {
        clearTimeout(timer);
        stream.stop();
        resolve(found);
      }
      stream.start();
    }));
  }
  return kept.get(key);
}

// About ``count`` positions from 1 to ``head``, each with its time: a sample is moved to the first
// event at or after it that the user's stream shows (a member's stream shows her project's events
// only), so that its time is the time of the event at its position. The head, when no event there
// is the user's, is taken at the time the page asks (nothing the user may see changed since).
// Answers [{position, time (seconds since the epoch)}], in the log's order.
export async function timedSamples(eventsUrl, head, count) {
  const out = [];
  for (const p of samples(head, count)) {
    if (out.length && out[out.length - 1].position >= p) {
      continue; // the event found for an earlier sample stands for this one too
    }
    const found = await eventFrom(eventsUrl, p);
    if (!found || found.position > head || !found.time) {
      break; // nothing this user may see from here to the head
    }
    out.push({ position: found.position, time: Date.parse(found.time) / 1000 });
  }
  if (!out.length || out[out.length - 1].position < head) {
    out.push({ position: head, time: Date.now() / 1000 });
  }
  return out;
}
