// The playground's entry: tabs, the server's address, and the first look at its models and voices.
import { $, initKeyForm, setBase, showError } from "./common.js";
import { initLive } from "./live.js";
import { initServer, refreshModels, refreshVoices, watch } from "./server.js";
import { fillVoices, initSpeak } from "./speak.js";
import { fillModels, initTranscribe } from "./transcribe.js";

const tabs = [...document.querySelectorAll('[role="tab"]')];

function select(tab) {
  for (const t of tabs) {
    const on = t === tab;
    t.setAttribute("aria-selected", String(on));
    t.tabIndex = on ? 0 : -1;
    $(t.getAttribute("aria-controls")).hidden = !on;
  }
  watch(tab.id === "tab-server");
}

function initTabs() {
  tabs.forEach((tab, i) => {
    tab.addEventListener("click", () => select(tab));
    tab.addEventListener("keydown", (e) => {
      const step = { ArrowRight: 1, ArrowLeft: -1 }[e.key];
      if (!step) return;
      const next = tabs[(i + step + tabs.length) % tabs.length];
      next.focus();
      select(next);
    });
  });
  const wanted = tabs.find((t) => t.id === "tab-" + location.hash.slice(1));
  if (wanted) select(wanted);
}

async function refresh() {
  try {
    await refreshModels();
    fillVoices(await refreshVoices());
  } catch (error) {
    showError(`cannot reach the server: ${error.message || error}`);
  }
}

initKeyForm();
initTranscribe();
initSpeak();
initLive();
initServer(fillModels);
initTabs();
$("server-form").addEventListener("submit", (e) => {
  e.preventDefault();
  setBase($("server-url").value.trim());
  showError("");
  refresh();
});
refresh();
