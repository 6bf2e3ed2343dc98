// Checks run inside the playground by tests/e2e/test_playground_a11y.py (added to each page before its own
// scripts): WCAG contrast of texts, control edges and focus outlines, and what Tab should reach.
(() => {
  /** [r, g, b, alpha] from a computed colour ("rgb(...)" or "rgba(...)"). */
  const parse = (css) => {
    const m = /rgba?\(([^)]*)\)/.exec(css || "");
    if (!m) return null;
    const p = m[1].split(/[\s,/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  };
  /** `top` composited over the opaque colour `under`. */
  const over = (top, under) => [0, 1, 2].map((i) => top[i] * top[3] + under[i] * (1 - top[3])).concat(1);
  // WCAG 2's relative luminance and contrast ratio.
  const linear = (v) => (v / 255 <= 0.04045 ? v / 255 / 12.92 : ((v / 255 + 0.055) / 1.055) ** 2.4);
  const luminance = (c) => 0.2126 * linear(c[0]) + 0.7152 * linear(c[1]) + 0.0722 * linear(c[2]);
  const ratio = (a, b) => {
    const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
    return Math.round(((hi + 0.05) / (lo + 0.05)) * 100) / 100;
  };
  const hex = (c) => "#" + c.slice(0, 3).map((v) => Math.round(v).toString(16).padStart(2, "0")).join("");

  /** The colour under `el`: its own background over its ancestors' up to the first opaque one, over white
   * (the canvas); `image` when a background image lies under it, where no one colour is known. */
  const backdrop = (el) => {
    const layers = [];
    let image = false;
    for (let e = el; e; e = e.parentElement) {
      const style = getComputedStyle(e);
      if (style.backgroundImage !== "none") image = true;
      const c = parse(style.backgroundColor);
      if (c && c[3] > 0) {
        layers.push(c);
        if (c[3] >= 1) break;
      }
    }
    return { colour: layers.reverse().reduce((under, top) => over(top, under), [255, 255, 255, 1]), image };
  };
  const opacity = (el) => {
    let o = 1;
    for (let e = el; e; e = e.parentElement) o *= Number(getComputedStyle(e).opacity);
    return o;
  };
  const name = (el) => {
    if (el.id) return "#" + el.id;
    const classes = typeof el.className === "string" && el.className.trim() ? "." + el.className.trim().split(/\s+/).join(".") : "";
    return el.tagName.toLowerCase() + classes + (el.parentElement ? " in " + name(el.parentElement) : "");
  };
  /** Shown, and not visually hidden (the .sr pattern: a 1 px box that clips its text). */
  const seen = (el) => {
    if (!el.checkVisibility({ visibilityProperty: true, opacityProperty: true })) return false;
    for (let e = el; e; e = e.parentElement) {
      const r = e.getBoundingClientRect();
      if (r.width <= 1 || r.height <= 1) return false;
    }
    return true;
  };
  const NOT_TEXT_FIELDS = ["checkbox", "radio", "file", "range", "hidden", "color"];

  /** Every visible text (text nodes, field values, placeholders) with its colour as shown, what lies under
   * it, their ratio and the ratio WCAG AA needs (3 for large text: 24 px, or 18.66 px bold). Disabled
   * controls are left out, as WCAG 1.4.3 exempts them. */
  function textContrast() {
    const out = [];
    const check = (el, text, fgCss, kind) => {
      const style = getComputedStyle(el);
      const { colour: bg, image } = backdrop(el);
      const fg = parse(fgCss);
      const shown = over([fg[0], fg[1], fg[2], fg[3] * opacity(el)], bg);
      const px = parseFloat(style.fontSize);
      const large = px >= 24 || (Number(style.fontWeight) >= 700 && px >= 18.66);
      out.push({ where: name(el), kind, text: text.trim().slice(0, 40), fg: hex(shown), bg: hex(bg), image,
                 ratio: ratio(shown, bg), need: large ? 3 : 4.5 });
    };
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const el = node.parentElement;
      if (!node.textContent.trim() || !el || ["SCRIPT", "STYLE", "OPTION", "TEMPLATE"].includes(el.tagName)) continue;
      if (el.closest("button:disabled, fieldset:disabled") || !seen(el)) continue;
      const range = document.createRange();
      range.selectNodeContents(node);
      if (![...range.getClientRects()].some((r) => r.width > 0 && r.height > 0)) continue;
      check(el, node.textContent, getComputedStyle(el).color, "text");
    }
    for (const el of document.querySelectorAll("input, select, textarea")) {
      if (NOT_TEXT_FIELDS.includes(el.type) || el.disabled || !seen(el)) continue;
      if (el.tagName === "SELECT") {
        if (el.selectedOptions.length) check(el, el.selectedOptions[0].text, getComputedStyle(el).color, "value");
      } else if (el.value) check(el, el.value, getComputedStyle(el).color, "value");
      else if (el.placeholder) check(el, el.placeholder, getComputedStyle(el, "::placeholder").color, "placeholder");
    }
    return out;
  }

  /** WCAG 1.4.11 for each visible, enabled control: its edge (border, or its own background, whichever is
   * stronger) against what surrounds it. Buttons with neither (the transcript's words) are left out: their
   * text is what identifies them. */
  function boundaries() {
    const out = [];
    for (const el of document.querySelectorAll("input, select, textarea, button")) {
      if (NOT_TEXT_FIELDS.includes(el.type) || el.disabled || !seen(el)) continue;
      const style = getComputedStyle(el);
      const around = backdrop(el.parentElement).colour;
      const own = backdrop(el).colour;
      const side = ["Top", "Right", "Bottom", "Left"].find(
        (s) => style[`border${s}Style`] !== "none" && parseFloat(style[`border${s}Width`]) > 0);
      const border = side ? over(parse(style[`border${side}Color`]), around) : null;
      if (!border && ratio(own, around) <= 1 && el.tagName === "BUTTON") continue;
      out.push({ where: name(el), border: border && hex(border), own: hex(own), around: hex(around),
                 ratio: Math.max(border ? ratio(border, around) : 1, ratio(own, around)) });
    }
    return out;
  }

  /** The focused element's indicator (WCAG 2.4.7): an outline or a box shadow, and the outline's colour
   * against what it is drawn on (around the element, unless its offset is negative); null on the body. */
  function focusIndicator() {
    const el = document.activeElement;
    if (!el || el === document.body) return null;
    const style = getComputedStyle(el);
    const outline = style.outlineStyle !== "none" && parseFloat(style.outlineWidth) > 0;
    const under = backdrop(parseFloat(style.outlineOffset) < 0 ? el : el.parentElement || el).colour;
    const colour = outline ? over(parse(style.outlineColor), under) : null;
    return { where: name(el), id: el.id, tag: el.tagName.toLowerCase(), text: (el.textContent || "").trim().slice(0, 30),
             indicator: outline || style.boxShadow !== "none", outlinePx: outline ? parseFloat(style.outlineWidth) : 0,
             ratio: colour ? ratio(colour, under) : 0, colour: colour && hex(colour), under: hex(under) };
  }

  /** What Tab should reach, in document order: shown, enabled and in the tab order. */
  function tabbable() {
    const all = document.querySelectorAll("a[href], button, input, select, textarea, summary, [tabindex]");
    return [...all].filter((el) => el.tabIndex >= 0 && !el.disabled && el.checkVisibility({ visibilityProperty: true }))
      .map((el) => el.id || el.tagName.toLowerCase() + ":" + el.textContent.trim().slice(0, 30));
  }

  window.a11y = { textContrast, boundaries, focusIndicator, tabbable };
})();
