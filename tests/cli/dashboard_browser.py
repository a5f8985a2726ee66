#!/usr/bin/python3
"""dashboard_browser.py DYNAPAR JOB OUT: a short `dynapar train --dashboard 0` run is watched
in a real headless Chromium (Selenium): the page must show the plan in force (a stage box per
device of the plan the run wrote to plans.jsonl) and a step counter that advances; /metrics
and /api/state must agree with it. Leaves OUT/dashboard.png (a screenshot)."""
import json, os, re, subprocess, sys, time, urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

binary, job, out = sys.argv[1:4]
os.makedirs(out, exist_ok=True)
url_file = os.path.join(out, "dashboard.url")
if os.path.exists(url_file):
    os.remove(url_file)
env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
# Far more steps than the watch needs (it ends the run): under load a browser that starts
# slowly must still find the run going, its counter able to advance.
steps = 2000
run = subprocess.Popen([binary, "train", job, "--steps", str(steps), "--out", out, "--dashboard", "0"],
                       stdout=subprocess.DEVNULL, stderr=open(os.path.join(out, "train.log"), "w"), env=env)
driver = None
try:
    for _ in range(600):
        if os.path.exists(url_file) and open(url_file).read().strip():
            break
        assert run.poll() is None, "the run ended before serving the dashboard (see train.log)"
        time.sleep(0.1)
    url = open(url_file).read().strip()
    opts = Options()
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1200,900"]:
        opts.add_argument(a)
    opts.binary_location = "/usr/bin/chromium"
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    driver.get(url)

    # The page redraws itself every poll: elements are read in one script, never kept across
    # a redraw (a kept one may be stale by the time its text is asked for).
    def texts(selector):
        return driver.execute_script("return Array.from(document.querySelectorAll(arguments[0])).map(e => e.innerText)", selector)

    def step_shown():
        shown = texts("#step")
        m = re.match(r"step (\d+) / %d" % steps, shown[0]) if shown else None
        return int(m.group(1)) if m else None

    deadline = time.time() + 60
    first = None
    while time.time() < deadline:
        first = step_shown()
        if first and texts("#plan .stage"):
            break
        time.sleep(0.2)
    assert first, "no step counter on the page: " + str(texts("#step"))
    # The plan drawn: one stage box per device of the plan in force, as plans.jsonl has it.
    plans = [json.loads(l) for l in open(os.path.join(out, "plans.jsonl")) if l.strip()]
    stages = texts("#plan .stage")
    assert stages, "no plan drawn"
    shown = sorted(int(re.match(r"d(\d+)", s).group(1)) for s in stages)
    candidates = [sorted(d for g in p["plan"]["groups"] for d in g["devices"]) for p in plans]
    assert shown in candidates, (shown, candidates)
    # The counter advances while the run goes on.
    later = first
    while time.time() < deadline and later <= first:
        time.sleep(0.3)
        later = step_shown() or first
    assert later > first, f"the step counter stayed at {first}"
    driver.save_screenshot(os.path.join(out, "dashboard.png"))
    state = json.load(urllib.request.urlopen(url + "api/state"))
    metrics = urllib.request.urlopen(url + "metrics").read().decode()
    m = re.search(r"^dynapar_step (\d+)", metrics, re.M)
    assert m and int(m.group(1)) >= later, metrics[:300]
    # Prometheus's own linter (Debian's prometheus package) accepts the text as served.
    import shutil
    import subprocess
    promtool = shutil.which("promtool")
    assert promtool, "no promtool (bootstrap.sh test installs Debian's prometheus)"
    lint = subprocess.run([promtool, "check", "metrics"], input=metrics, text=True, capture_output=True)
    assert lint.returncode == 0 and not lint.stdout.strip() and not lint.stderr.strip(), (lint.stdout, lint.stderr, metrics[:600])
    assert state["steps"] == steps and state["plan"], state
    # DNS rebinding: a request for another site's name pointed here is refused.
    import urllib.error
    try:
        urllib.request.urlopen(urllib.request.Request(url + "api/state", headers={"Host": "rebind.example:8265"}))
        raise AssertionError("the dashboard served a request for Host rebind.example")
    except urllib.error.HTTPError as e:
        assert e.code == 403, e.code
    print(f"ok: page showed steps {first} -> {later}, plan devices {shown}")
finally:
    if driver:
        driver.quit()
    run.terminate()
    run.wait(30)
