"use strict";
/*
 * The microphone button: live dictation into the message box through /v1/realtime.
 *
 * A transcription session (intent=transcription) with the server's voice-activity detector:
 * the page streams the microphone as input_audio_buffer.append events (mic-worklet.js makes
 * 24 kHz PCM16 of it) and the server decides where each utterance ends. Each utterance's
 * text appears as it is written (…transcription.delta) and stays once completed. A browser
 * cannot set headers on a WebSocket, so an API key goes as OpenAI's browser subprotocol
 * (openai-insecure-api-key.<key>). Stopping commits what was said last, waits briefly for
 * its transcript, then closes. Text only ever goes through textContent / value.
 */
(function () {
  const $ = (id) => document.getElementById(id);
  const FINISH_WAIT_MS = 5000;
  let live = null; // {socket, context, stream, node, pending, done}

  function status(text) { $("status").textContent = text || ""; }

  function setButton(on) {
    const button = $("mic");
    button.setAttribute("aria-pressed", on ? "true" : "false");
    button.textContent = on ? "■ Stop dictation" : "🎤 Speak";
  }

  function socketUrl() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    return `${scheme}//${location.host}/v1/realtime?intent=transcription`;
  }

  function toBase64(buffer) {
    const bytes = new Uint8Array(buffer);
    let binary = "";
    for (let i = 0; i < bytes.length; i += 0x8000) {
      binary += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
    }
    return btoa(binary);
  }

  // The prompt keeps what was typed; the utterance being transcribed is shown after it and
  // replaced by its final text on `completed`.
  function showTranscript(session, itemId, text, final) {
    const prompt = $("prompt");
    if (!(itemId in session.items)) {
      session.items[itemId] = "";
      session.base = prompt.value;
    }
    session.items[itemId] = text;
    const spacer = session.base && !/\s$/.test(session.base) ? " " : "";
    prompt.value = session.base + (text ? spacer + text : "");
    if (final) {
      session.base = prompt.value;
      delete session.items[itemId];
      const button = $("mic");
      button.dataset.utterances = String(Number(button.dataset.utterances || 0) + 1);
    }
  }

  function onEvent(session, event) {
    switch (event.type) {
      case "input_audio_buffer.speech_started":
        status("Listening… (speech)");
        break;
      case "input_audio_buffer.speech_stopped":
        status("Transcribing…");
        break;
      case "input_audio_buffer.committed":
        session.pending += 1;
        break;
      case "conversation.item.input_audio_transcription.delta":
        showTranscript(session, event.item_id,
          (session.items[event.item_id] || "") + (event.delta || ""), false);
        break;
      case "conversation.item.input_audio_transcription.completed":
        showTranscript(session, event.item_id, event.transcript || "", true);
        session.pending -= 1;
        status(session.closing ? "" : "Listening…");
        if (session.closing && session.pending <= 0) session.socket.close(1000);
        break;
      case "conversation.item.input_audio_transcription.failed":
        session.pending -= 1;
        status(`Transcription failed: ${(event.error && event.error.message) || "unknown error"}`);
        break;
      case "error":
        if (event.error && event.error.code === "input_audio_buffer_commit_empty") break;
        status(`Dictation: ${(event.error && event.error.message) || "error"}`);
        break;
      default:
        break;
    }
  }

  async function start() {
    const key = $("api-key").value.trim();
    const protocols = ["realtime"];
    if (key) protocols.push(`openai-insecure-api-key.${key}`);
    let stream;
    try {
      stream = await navigator.mediaDevices.getUserMedia({ audio: { channelCount: 1 } });
    } catch (error) {
      status(`No microphone: ${error.message}`);
      return;
    }
    const context = new AudioContext();
    await context.audioWorklet.addModule("/ui/mic-worklet.js");
    const node = new AudioWorkletNode(context, "pcm-capture");
    const socket = new WebSocket(socketUrl(), protocols);
    const session = { socket, context, stream, node, items: {}, base: "", pending: 0 };
    live = session;
    setButton(true);
    status("Connecting…");
    socket.onmessage = (message) => onEvent(session, JSON.parse(message.data));
    socket.onclose = (event) => {
      if (live === session) stop(false);
      if (event.code !== 1000 && !session.closing) {
        status(`Dictation ended: ${event.reason || "the connection closed (" + event.code + ")"}`);
      }
    };
    socket.onopen = () => {
      status("Listening…");
      context.createMediaStreamSource(stream).connect(node);
      node.port.onmessage = (chunk) => {
        if (socket.readyState !== WebSocket.OPEN) return;
        socket.send(JSON.stringify({ type: "input_audio_buffer.append", audio: toBase64(chunk.data) }));
      };
    };
  }

  function stop(commit) {
    const session = live;
    if (!session) return;
    live = null;
    setButton(false);
    session.stream.getTracks().forEach((track) => track.stop());
    session.node.port.onmessage = null;
    session.context.close();
    if (commit && session.socket.readyState === WebSocket.OPEN) {
      session.closing = true;
      session.socket.send(JSON.stringify({ type: "input_audio_buffer.commit" }));
      setTimeout(() => session.socket.close(1000), FINISH_WAIT_MS);
    } else if (session.socket.readyState <= WebSocket.OPEN) {
      session.socket.close(1000);
    }
  }

  document.addEventListener("DOMContentLoaded", () => {
    const button = $("mic");
    if (!navigator.mediaDevices || !window.AudioWorkletNode) {
      button.disabled = true;
      button.title = "This browser cannot capture audio here (it needs https or localhost).";
      return;
    }
    button.addEventListener("click", () => (live ? stop(true) : start()));
  });
})();
