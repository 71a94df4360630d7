"use strict";
/*
 * The chat page. It talks to this gateway's own OpenAI API, like any other client:
 * GET /v1/models for the picker, POST /v1/chat/completions with stream=true for answers.
 *
 * - Streaming uses fetch + ReadableStream (EventSource cannot POST); Stop aborts the fetch,
 *   the gateway sees the connection close and cancels the request in Triton.
 * - Attachments are sent inline: images as image_url data: URLs, a video as a video_url
 *   data: URL, an audio file as input_audio (base64 plus format).
 * - Nothing from the model or from a file name is ever parsed as HTML: text goes through
 *   textContent / Text nodes only (markdown.js builds elements the same way).
 */
(function () {
  const $ = (id) => document.getElementById(id);
  const state = { history: [], attachments: [], controller: null };

  // ---- small DOM helpers -------------------------------------------------------------
  function element(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function showStatus(text) {
    $("status").textContent = text || "";
  }

  function authHeaders() {
    const key = $("api-key").value.trim();
    return key ? { Authorization: `Bearer ${key}` } : {};
  }

  // ---- errors in words -----------------------------------------------------------------
  const STATUS_WORDS = {
    400: "The request was rejected", 401: "The API key was not accepted",
    404: "Not found", 413: "The request is too large", 429: "The server is busy",
    499: "The request was cancelled", 502: "The model server failed",
    503: "The model server is unavailable",
  };

  async function describeResponse(response) {
    let detail = "";
    try {
      const body = await response.json();
      detail = (body && body.error && body.error.message) || "";
    } catch (_) { /* not JSON: the status says enough */ }
    const words = STATUS_WORDS[response.status] || `The server answered ${response.status}`;
    return `${words} (HTTP ${response.status})${detail ? ": " + detail : "."}`;
  }

  // ---- models --------------------------------------------------------------------------
  async function loadModels() {
    const select = $("model");
    try {
      const response = await fetch("/v1/models", { headers: authHeaders() });
      if (!response.ok) throw new Error(await describeResponse(response));
      const models = (await response.json()).data || [];
      const previous = select.value;
      select.replaceChildren(...models.map((m) => new Option(m.id, m.id)));
      if (models.some((m) => m.id === previous)) select.value = previous;
      showStatus(models.length ? "" : "This gateway serves no models.");
    } catch (error) {
      showStatus(`Could not list the models: ${error.message}`);
    }
  }

  // ---- attachments ---------------------------------------------------------------------
  function kindOf(file) {
    const type = (file.type || "").split("/")[0];
    return ["image", "video", "audio"].includes(type) ? type : null;
  }

  function audioFormat(file) {
    const subtype = (file.type.split("/")[1] || "").replace(/^x-/, "");
    const known = { mpeg: "mp3", mp3: "mp3", wav: "wav", wave: "wav", flac: "flac", ogg: "ogg" };
    return known[subtype] || (file.name.split(".").pop() || "wav").toLowerCase();
  }

  function readDataUrl(file) {
    return new Promise((resolve, reject) => {
      const reader = new FileReader();
      reader.onload = () => resolve(reader.result);
      reader.onerror = () => reject(reader.error);
      reader.readAsDataURL(file);
    });
  }

  // Reading files is asynchronous; a chain keeps attachments in the order they were added
  // when a paste or a drop arrives while the picker's files are still being read.
  let adding = Promise.resolve();
  function addFiles(files) {
    adding = adding.then(() => readFiles(files))
      .catch((error) => showStatus(`Could not read the file: ${error.message}`));
    return adding;
  }

  async function readFiles(files) {
    for (const file of files) {
      const kind = kindOf(file);
      if (!kind) {
        showStatus(`Not attached: “${file.name}” is not an image, video or audio file.`);
        continue;
      }
      const item = { kind, name: file.name, url: await readDataUrl(file) };
      if (kind === "audio") item.format = audioFormat(file);
      if (kind !== "image") {  // one video and one audio file at most: replace the old one
        state.attachments = state.attachments.filter((a) => a.kind !== kind);
      }
      state.attachments.push(item);
    }
    renderAttachments();
  }

  function thumbnail(item, onRemove) {
    const figure = element("figure", "thumb");
    let preview;
    if (item.kind === "image" || item.kind === "video") {
      preview = document.createElement(item.kind === "image" ? "img" : "video");
      preview.src = item.url;
      preview.alt = item.name;  // a property, never markup
    } else {
      preview = element("div", "icon", "♪");
    }
    figure.title = item.name;
    figure.append(preview, element("figcaption", "", item.name));
    if (onRemove) {
      const remove = element("button", "", "×");
      remove.type = "button";
      remove.setAttribute("aria-label", `Remove ${item.name}`);
      remove.addEventListener("click", onRemove);
      figure.append(remove);
    }
    return figure;
  }

  function renderAttachments() {
    const box = $("attachments");
    box.className = state.attachments.length ? "thumbs" : "";
    box.replaceChildren(...state.attachments.map((item, index) => thumbnail(item, () => {
      state.attachments.splice(index, 1);
      renderAttachments();
    })));
  }

  function contentParts(text, attachments) {
    if (!attachments.length) return text;
    const parts = text ? [{ type: "text", text }] : [];
    for (const item of attachments) {
      if (item.kind === "image") parts.push({ type: "image_url", image_url: { url: item.url } });
      if (item.kind === "video") parts.push({ type: "video_url", video_url: { url: item.url } });
      if (item.kind === "audio") {
        const data = item.url.slice(item.url.indexOf(",") + 1);
        parts.push({ type: "input_audio", input_audio: { data, format: item.format } });
      }
    }
    return parts;
  }

  // ---- the conversation view -----------------------------------------------------------
  function addMessage(role, text, attachments) {
    const box = element("article", `message ${role}`);
    const body = element("div", "body", text);
    box.append(element("div", "role", role), body);
    if (attachments && attachments.length) {
      const thumbs = element("div", "thumbs");
      thumbs.append(...attachments.map((item) => thumbnail(item)));
      box.append(thumbs);
    }
    const meta = element("div", "meta");
    box.append(meta);
    $("conversation").append(box);
    box.scrollIntoView({ block: "end" });
    return { box, body, meta };
  }

  function finishAnswer(view, text, outcome) {
    view.box.dataset.state = outcome;
    if ($("markdown").checked && text) {
      view.body.classList.add("markdown");
      view.body.replaceChildren(window.renderMarkdown(text));
    }
  }

  function showStats(view, stats, outcome) {
    const parts = [];
    if (stats.first !== null) {
      parts.push(`first token ${Math.round(stats.first - stats.started)} ms`);
      const tokens = stats.usage ? stats.usage.completion_tokens : stats.chunks;
      const seconds = (stats.end - stats.first) / 1000;
      if (tokens > 1 && seconds > 0) parts.push(`${((tokens - 1) / seconds).toFixed(1)} tokens/s`);
    }
    if (stats.usage) {
      const u = stats.usage;
      parts.push(`${u.prompt_tokens} prompt + ${u.completion_tokens} completion = ` +
        `${u.total_tokens} tokens`);
    } else if (stats.chunks) {
      parts.push(`about ${stats.chunks} tokens streamed`);
    }
    if (outcome === "stopped") parts.push("stopped");
    view.meta.textContent = parts.join(" · ");
  }

  // ---- streaming -----------------------------------------------------------------------
  async function* sseEvents(body) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value.replace(/\r\n/g, "\n");
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const frame = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = frame.split("\n").filter((l) => l.startsWith("data:"))
          .map((l) => l.slice(5).trimStart()).join("\n");
        if (data === "[DONE]") return;
        if (data) yield JSON.parse(data);
      }
    }
  }

  function requestBody() {
    return {
      model: $("model").value,
      messages: state.history,
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: Number($("max-tokens").value) || undefined,
      temperature: Number($("temperature").value),
    };
  }

  async function relayAnswer(view, stats, signal) {
    const response = await fetch("/v1/chat/completions", {
      method: "POST",
      headers: { "Content-Type": "application/json", ...authHeaders() },
      body: JSON.stringify(requestBody()),
      signal,
    });
    if (!response.ok) throw new Error(await describeResponse(response));
    let text = "";
    for await (const event of sseEvents(response.body)) {
      if (event.error) throw new Error(`The answer failed: ${event.error.message}`);
      if (event.usage) stats.usage = event.usage;
      const delta = event.choices && event.choices[0] && event.choices[0].delta.content;
      if (!delta) continue;
      if (stats.first === null) stats.first = performance.now();
      stats.chunks += 1;
      text += delta;
      view.body.append(document.createTextNode(delta));  // text, never HTML
      view.text = text;
    }
    return text;
  }

  async function ask(userMessage) {
    const view = addMessage("assistant", "");
    view.box.dataset.state = "streaming";
    view.text = "";
    const stats = { started: performance.now(), first: null, chunks: 0, usage: null, end: 0 };
    const controller = new AbortController();
    const history = state.history;  // "New chat" may replace it while this answer streams
    setBusy(controller);
    let outcome = "done";
    try {
      const text = await relayAnswer(view, stats, controller.signal);
      history.push({ role: "assistant", content: text });
    } catch (error) {
      if (error.name === "AbortError") {
        outcome = "stopped";
        history.push({ role: "assistant", content: view.text });
      } else {
        outcome = "error";
        const message = error instanceof TypeError
          ? `Could not reach the gateway (${error.message}).` : error.message;
        view.box.append(element("p", "error", message));
        history.splice(history.indexOf(userMessage), 1);  // keep the history sendable
      }
    } finally {
      stats.end = performance.now();
      finishAnswer(view, view.text, outcome);
      showStats(view, stats, outcome);
      setBusy(null);
    }
  }

  function setBusy(controller) {
    state.controller = controller;
    $("send").disabled = controller !== null;
    $("stop").disabled = controller === null;
  }

  function send(event) {
    event.preventDefault();
    const text = $("prompt").value.trim();
    if (state.controller || (!text && !state.attachments.length)) return;
    if (!$("model").value) return showStatus("Pick a model first.");
    showStatus("");
    const userMessage = { role: "user", content: contentParts(text, state.attachments) };
    addMessage("user", text, state.attachments);
    state.history.push(userMessage);
    state.attachments = [];
    renderAttachments();
    $("prompt").value = "";
    ask(userMessage);
  }

  // ---- wiring --------------------------------------------------------------------------
  function filesOf(transfer) {
    return transfer ? Array.from(transfer.files || []) : [];
  }

  function wire() {
    $("composer").addEventListener("submit", send);
    $("stop").addEventListener("click", () => state.controller && state.controller.abort());
    $("prompt").addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey) send(event);
    });
    $("file").addEventListener("change", async (event) => {
      await addFiles(Array.from(event.target.files));
      event.target.value = "";
    });
    document.addEventListener("paste", (event) => {
      const files = filesOf(event.clipboardData);
      if (files.length) {
        event.preventDefault();
        addFiles(files);
      }
    });
    const composer = $("composer");
    composer.addEventListener("dragover", (event) => {
      event.preventDefault();
      composer.classList.add("dragging");
    });
    composer.addEventListener("dragleave", () => composer.classList.remove("dragging"));
    composer.addEventListener("drop", (event) => {
      event.preventDefault();
      composer.classList.remove("dragging");
      addFiles(filesOf(event.dataTransfer));
    });
    $("api-key").addEventListener("change", loadModels);
    $("new-chat").addEventListener("click", () => {
      if (state.controller) state.controller.abort();
      state.history = [];
      $("conversation").replaceChildren();
    });
  }

  wire();
  loadModels();
})();
