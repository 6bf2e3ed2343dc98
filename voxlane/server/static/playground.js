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
    // The WAI-ARIA tabs pattern: arrows move to the next or previous tab (around the ends), Home and End to
    // the first and last, and the tab moved to is selected at once.
    tab.addEventListener("keydown", (e) => {
      const to = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: tabs.length - 1 }[e.key];
      if (to === undefined) return;
      e.preventDefault();
      const next = tabs[(to + tabs.length) % tabs.length];
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
