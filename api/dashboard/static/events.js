// The log's event stream (GET /v2.1/stratus/events on `stratus watch`), read with fetch so that the
// token travels in the X-Auth-Token header: EventSource can send no header, and a token in a URL
// would end up in access logs. Server-sent events are parsed here; on a broken connection the
// stream resumes after the last position seen (Last-Event-ID), as EventSource would.

import { session, signOut } from "./api.js";

const RETRY_MS = 2000;

export class EventStream {
  // ``onEvent(event)``: each CloudEvent (its ``position`` set); ``onPosition(position, live)``: the
  // log position the page is at, and whether the stream is connected.
  constructor(url, { onEvent, onPosition }) {
    this.url = url;
    this.onEvent = onEvent;
    this.onPosition = onPosition;
    this.position = null;
    this.live = false;
    this.abort = null;
    this.stopped = false;
  }

  start() {
    this.stopped = false;
    this.connect();
  }

  stop() {
    this.stopped = true;
    if (this.abort) {
      this.abort.abort();
    }
  }

  setLive(live) {
    this.live = live;
    this.onPosition(this.position, live);
  }

  async connect() {
    const s = session();
    if (this.stopped || !s) {
      return;
    }
    this.abort = new AbortController();
    const headers = { "X-Auth-Token": s.token };
    if (this.position !== null) {
      headers["Last-Event-ID"] = String(this.position);
    }
    try {
      const resp = await fetch(this.url, { headers, signal: this.abort.signal, cache: "no-store" });
      if (!resp.ok) {
        throw new Error(`event stream: ${resp.status}`);
      }
      this.setLive(true);
      await this.read(resp.body.getReader());
    } catch (e) {
      if (this.stopped) {
        return;
      }
      console.warn("event stream interrupted; resuming", e.message);
    }
    this.setLive(false);
    if (!this.stopped) {
      setTimeout(() => this.connect(), RETRY_MS);
    }
  }

  async read(reader) {
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) {
        return;
      }
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        if (await this.message(block)) {
          return;
        }
      }
    }
  }

  // One SSE message; true when the server ended the stream.
  async message(block) {
    let id = null;
    let type = "";
    let data = "";
    for (const line of block.split("\n")) {
      if (line.startsWith(": stratus events from position ")) {
        // The stream's first comment: it starts after this position.
        const start = Number(line.slice(31));
        if (this.position === null && start > 0) {
          this.position = start - 1;
          this.onPosition(this.position, true);
          // Views that loaded before the stream began read again from where it begins.
          this.onEvent({ type: "stratus.stream.started", position: this.position });
        }
      } else if (line.startsWith("id: ")) {
        id = Number(line.slice(4));
      } else if (line.startsWith("event: ")) {
        type = line.slice(7);
      } else if (line.startsWith("data: ")) {
        data += line.slice(6);
      }
    }
    if (type === "stratus.stream.ended") {
      const why = JSON.parse(data).reason;
      if (why === "unauthorized") {
        this.stop();
        await signOut();
      }
      return true;
    }
    if (id === null || !data) {
      return false;
    }
    this.position = id;
    const event = JSON.parse(data);
    event.position = id;
    this.onEvent(event);
    this.onPosition(this.position, true);
    return false;
  }
}
