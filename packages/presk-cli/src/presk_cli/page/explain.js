// presk explain --format html: the tabs, the highlighting of an element's sites in every
// column, and the Network tab's boxes (docs/explain.md). No resource is fetched.
(function () {
  "use strict";
  const tabs = document.querySelectorAll("nav button");
  tabs.forEach((b) => b.addEventListener("click", () => {
    tabs.forEach((o) => o.classList.toggle("on", o === b));
    document.querySelectorAll(".tab").forEach((t) => t.classList.toggle("on", t.id === b.dataset.tab));
  }));
  const sitesOf = (el) => new Set((el.dataset.sites || "").split(" ").filter(Boolean));
  const elements = Array.from(document.querySelectorAll(".el"));
  function pick(el) {
    const wanted = sitesOf(el);
    elements.forEach((o) => {
      o.classList.remove("picked");
      const hit = Array.from(sitesOf(o)).some((s) => wanted.has(s));
      o.classList.toggle("hl", hit);
    });
    el.classList.add("picked");
  }
  elements.forEach((el) => el.addEventListener("click", (ev) => {
    if (ev.target.tagName === "A") return;
    pick(el);
  }));
  window.addEventListener("hashchange", () => {
    const el = document.getElementById(location.hash.slice(1));
    if (!el) return;
    const tab = el.closest(".tab");  // a link into the other tab shows it
    if (tab && !tab.classList.contains("on")) {
      document.querySelector(`nav button[data-tab=${tab.id}]`).click();
      el.scrollIntoView();
    }
    if (el.classList.contains("el")) pick(el);
  });
  const boxes = Array.from(document.querySelectorAll("details.box"));
  const all = document.getElementById("expand-all");
  if (all) all.addEventListener("click", () => {
    const open = !boxes.every((b) => b.open);
    boxes.forEach((b) => { b.open = open; });
    all.textContent = open ? "Collapse all" : "Expand all";
  });
  const memory = document.getElementById("memory");
  if (memory) memory.addEventListener("click", () => {
    const on = memory.classList.toggle("on");
    boxes.forEach((b) => {
      const share = parseFloat(b.dataset.share || "0");
      b.style.background = on ? `rgba(215, 80, 40, ${Math.min(0.85, 0.08 + share)})` : "";
    });
  });
})();
