/* The chaos campaign page (cluster/chaos/campaign.py): inline in campaign.html.
 * The page is drawn in Python; this only measures it. When done, <body> carries
 * data-ready and data-overflow (the elements that overflow horizontally, or "none"),
 * which the browser tests read. */
(function () {
  "use strict";
  const over = [];
  const root = document.documentElement;
  if (root.scrollWidth > root.clientWidth + 1) over.push("page");
  const width = root.clientWidth;
  for (const el of document.querySelectorAll("main *")) {
    const box = el.getBoundingClientRect();
    if (box.width > 0 && (box.left < -0.5 || box.right > width + 0.5)) {
      over.push(el.id || el.getAttribute("data-chart") || el.className.baseVal || el.className || el.tagName);
    }
  }
  for (const svg of document.querySelectorAll("svg.hist")) {
    const frame = svg.viewBox.baseVal;
    for (const label of svg.querySelectorAll("text.x, text.y")) {
      const box = label.getBBox();
      if (box.x < -0.5 || box.x + box.width > frame.width + 0.5) {
        over.push(svg.getAttribute("data-chart") + ":" + label.textContent);
        break;
      }
    }
  }
  document.body.dataset.overflow = over.length ? Array.from(new Set(over)).join(" ") : "none";
  document.body.dataset.ready = "1";
})();
