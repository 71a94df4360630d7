"use strict";
/*
 * The microphone's samples as the Realtime API's audio/pcm: 16-bit mono at 24 kHz.
 * Runs in the audio thread; the context's rate (often 48 kHz) is resampled here by linear
 * interpolation, and ~100 ms chunks are posted to the page, which sends them as
 * input_audio_buffer.append events.
 */
const TARGET_RATE = 24000;
const CHUNK = 2400; // 100 ms at 24 kHz

class PcmCapture extends AudioWorkletProcessor {
  constructor() {
    super();
    this.step = sampleRate / TARGET_RATE; // input samples per output sample
    this.position = 0; // where the next output sample falls, in input samples
    this.previous = 0; // the last input sample of the block before
    this.out = new Int16Array(CHUNK);
    this.filled = 0;
  }

  process(inputs) {
    const channel = inputs[0] && inputs[0][0];
    if (!channel) return true;
    while (this.position < channel.length) {
      const i = Math.floor(this.position);
      const frac = this.position - i;
      const a = i === 0 ? this.previous : channel[i - 1];
      const b = channel[i];
      const value = Math.max(-1, Math.min(1, a + (b - a) * frac));
      this.out[this.filled++] = value < 0 ? value * 32768 : value * 32767;
      if (this.filled === CHUNK) {
        this.port.postMessage(this.out.buffer, [this.out.buffer]);
        this.out = new Int16Array(CHUNK);
        this.filled = 0;
      }
      this.position += this.step;
    }
    this.position -= channel.length;
    this.previous = channel[channel.length - 1];
    return true;
  }
}

registerProcessor("pcm-capture", PcmCapture);
