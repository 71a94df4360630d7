"use strict";
/*
 * A small, safe Markdown subset for model answers: fenced code, headings, lists,
 * paragraphs, `code`, **bold** and *emphasis*.
 *
 * Safety comes from construction, not from sanitising: every piece of model text becomes a
 * Text node (createTextNode / textContent), and only the fixed elements below are ever
 * created. No HTML string is parsed, so a <script> or an onerror= in an answer stays text.
 * Links are left as plain text on purpose: a model-written href is an attack surface.
 */
(function () {
  const INLINE = /(`[^`\n]+`)|(\*\*[^*\n]+\*\*)|(\*[^*\s][^*\n]*\*)/g;

  function inline(parent, text) {
    let last = 0;
    for (const match of text.matchAll(INLINE)) {
      parent.append(document.createTextNode(text.slice(last, match.index)));
      const token = match[0];
      const [tag, inner] = match[1] ? ["code", token.slice(1, -1)]
        : match[2] ? ["strong", token.slice(2, -2)] : ["em", token.slice(1, -1)];
      const element = document.createElement(tag);
      element.textContent = inner;
      parent.append(element);
      last = match.index + token.length;
    }
    parent.append(document.createTextNode(text.slice(last)));
    return parent;
  }

  function block(tag, text) {
    return inline(document.createElement(tag), text);
  }

  function codeBlock(lines) {
    const pre = document.createElement("pre");
    const code = document.createElement("code");
    code.textContent = lines.join("\n");
    pre.append(code);
    return pre;
  }

  const LIST_ITEM = /^\s*(?:([-*+])|(\d+)[.)])\s+(.*)$/;
  const HEADING = /^(#{1,6})\s+(.*)$/;

  function renderMarkdown(source) {
    const out = document.createDocumentFragment();
    const lines = source.replace(/\r\n?/g, "\n").split("\n");
    let paragraph = [];
    let list = null;
    const flush = () => {
      if (paragraph.length) out.append(block("p", paragraph.join("\n")));
      paragraph = [];
      list = null;
    };
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i];
      if (line.startsWith("```")) {
        flush();
        const code = [];
        for (i++; i < lines.length && !lines[i].startsWith("```"); i++) code.push(lines[i]);
        out.append(codeBlock(code));
        continue;
      }
      const heading = HEADING.exec(line);
      const item = LIST_ITEM.exec(line);
      if (heading) {
        flush();
        out.append(block(`h${Math.min(heading[1].length + 2, 6)}`, heading[2]));
      } else if (item) {
        if (paragraph.length) flush();
        const tag = item[1] ? "ul" : "ol";
        if (!list || list.tagName.toLowerCase() !== tag) {
          list = document.createElement(tag);
          out.append(list);
        }
        list.append(block("li", item[3]));
      } else if (!line.trim()) {
        flush();
      } else {
        list = null;
        paragraph.push(line);
      }
    }
    flush();
    return out;
  }

  window.renderMarkdown = renderMarkdown;
})();
