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

const EVENT_WAIT_MS = 3000; // without an event for this long, the stream has nothing more for the user

// ``count`` positions from ``first`` to ``head``, evenly spread, the last being ``head``.
function spread(first, head, count) {
  const span = head - first + 1;
  const n = Math.max(1, Math.min(count, span));
  const out = [];
  for (let i = 1; i <= n; i += 1) {
    out.push(first - 1 + Math.max(1, Math.round((span * i) / n)));
  }
  return [...new Set(out)];
}

// About ``count`` positions of the last ``window`` positions up to ``head``, each with its time.
// One stream, replayed from the first sample to the head, gives the times: each sample is moved to
// the first event at or after it that the stream shows this user (a member's stream shows her
// project's events only), so that its time is the time of the event at its position. The head, when
// no event of the user's is there, is drawn at the time the page asks (nothing the user may see
// changed since). One stream rather than one per sample: the watch allows a user a few streams,
// and a closed one keeps its place until the watch's next write to it.
// Answers [{position, time (seconds since the epoch)}], in the log's order.
export function timedSamples(eventsUrl, head, count, window) {
  const wanted = spread(Math.max(1, head - window + 1), head, count);
  const out = [];
  let next = 0; // the first sample no event has answered yet
  return new Promise((resolve) => {
    let timer = null;
    const stream = new EventStream(`${eventsUrl}?after=${wanted[0] - 1}`, {
      onEvent: (event) => {
        if (event.type === "stratus.stream.started" || event.position > head) {
          if (event.position > head) {
            done();
          }
          return;
        }
        if (event.position >= wanted[next] && event.time) {
          out.push({ position: event.position, time: Date.parse(event.time) / 1000 });
          while (next < wanted.length && wanted[next] <= event.position) {
            next += 1; // the event stands for every sample up to its position
          }
        }
        if (next >= wanted.length) {
          done();
        } else {
          idle();
        }
      },
      onPosition: () => {},
    });
    function idle() {
      clearTimeout(timer);
      timer = setTimeout(done, EVENT_WAIT_MS);
    }
    function done() {
      clearTimeout(timer);
      stream.stop();
      if (!out.length || out[out.length - 1].position < head) {
        out.push({ position: head, time: Date.now() / 1000 });
      }
      resolve(out);
    }
    idle();
    stream.start();
  });
}
