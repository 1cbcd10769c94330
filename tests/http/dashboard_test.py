#!/usr/bin/python3
"""The dashboard in a real browser (docs/dashboard.md): headless Chromium, driven through
Selenium and the system's chromedriver, against a real head. A wrong token is refused on the
login form; the token logs in, the nodes table fills with the head's node, the session cookie
is HttpOnly and SameSite=Strict, named for the head's port, and does not hold the token; a
submitted job appears with its log lines as they come and its actor, a finished job shows
SUCCEEDED and its whole log, a stopped one STOPPED; logout (a form post with the page's CSRF
token, from the page's own origin) goes back to the form. With
CELER_DASHBOARD_SCREENSHOT=FILE it saves a screenshot of the logged-in page (a job running)
there.

    tests/http/dashboard_test.py path/to/celer path/to/celer-job-driver
Exits 0 and prints "dashboard: passed"; 77 (skipped) without chromium or selenium.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:
    print("dashboard: skipped (python3-selenium is not installed: scripts/install-deps.sh)")
    sys.exit(77)


def main():
    celer = os.path.realpath(sys.argv[1])
    driver = os.path.realpath(sys.argv[2])
    chromium = shutil.which("chromium")
    chromedriver = shutil.which("chromedriver")
    if not chromium or not chromedriver:
        print("dashboard: skipped (chromium and chromium-driver are not installed: scripts/install-deps.sh)")
        return 77
    work = tempfile.mkdtemp(prefix="celer-dashboard-test.")
    env = dict(os.environ, CELER_TEMP_DIR=work)
    env.pop("CELER_TOKEN", None)
    env.pop("CELER_ADDRESS", None)
    browser = None
    try:
        subprocess.run([celer, "start", "--head", "--port", "0", "--num-cpus", "1", "--dashboard-port", "0",
                        "--labels", "zone=test"], env=env, check=True, capture_output=True, timeout=60)
        session = os.path.join(work, "session_latest")
        url = open(os.path.join(session, "http_url")).read().strip()
        token = open(os.path.join(session, "token")).read().strip()

        options = Options()
        options.binary_location = chromium
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1400,1100", "--user-data-dir=" + os.path.join(work, "chromium")):
            options.add_argument(flag)
        browser = webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)
        # The page refreshes every 2 s and replaces its rows: an element found just before
        # may be gone when read, so every read is a wait that looks again.
        wait = WebDriverWait(browser, 30, ignored_exceptions=(StaleElementReferenceException,))

        def cells_of(selector):
            return wait.until(lambda b: [c.text for c in b.find_element(By.CSS_SELECTOR, selector)
                                         .find_elements(By.TAG_NAME, "td")])

        def text_of(element_id):
            return wait.until(lambda b: (b.find_element(By.ID, element_id).text,))[0]

        # No session: the login form (served with the 401).
        browser.get(url + "/")
        field = wait.until(ec.presence_of_element_located((By.NAME, "token")))
        # A wrong token: the form again, saying so.
        field.send_keys("f" * 64)
        field.submit()
        problem = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "p.problem")))
        assert "matches neither" in problem.text, problem.text

        # The token: the page, and the head's node in its table.
        browser.find_element(By.NAME, "token").send_keys(token)
        browser.find_element(By.NAME, "token").submit()
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#nodes tr[data-node]")))
        wait.until(lambda b: "the admin" in b.find_element(By.ID, "who").text)
        cells = cells_of("#nodes tr[data-node]")
        assert cells[1] == "ALIVE", cells
        assert "0.0 / 1.0" in cells[2], cells
        assert "zone=test" in cells[8], cells
        assert text_of("problem") == "", text_of("problem")
        cookies = {c["name"]: c for c in browser.get_cookies()}
        port = url.rsplit(":", 1)[1].split("/")[0]
        session_cookie = cookies["celer_session_" + port]  # named for this head's port
        assert session_cookie["httpOnly"] is True, session_cookie
        assert session_cookie["sameSite"] == "Strict", session_cookie
        assert token not in session_cookie["value"], "the token itself is in the cookie"
        # The page's script cannot read the cookie.
        assert "celer_session" not in browser.execute_script("return document.cookie"), "the cookie is readable"

        # A running job: its row, its log lines as they come, its actor.
        def submit(*args):
            out = subprocess.run([celer, "submit", *args], env=env, check=True, capture_output=True, text=True,
                                 timeout=60)
            return out.stdout.strip()
        running = submit("--submission-id", "ticking", "--", driver, "forever")
        assert running == "ticking", running
        wait.until(lambda b: "tick 3" in b.find_element(By.ID, "log").text)
        row = cells_of("#jobs tr[data-job='ticking']")
        assert "RUNNING" in row, row
        assert text_of("log-job") == "ticking", text_of("log-job")
        wait.until(lambda b: "counter" in b.find_element(By.ID, "actors").text)
        assert "ALIVE" in text_of("actors"), text_of("actors")
        wait.until(lambda b: "1 ALIVE" in b.find_element(By.ID, "actors-summary").text)
        # The tasks section fills after the actors' in each refresh.
        wait.until(lambda b: "queued on nodes" in b.find_element(By.ID, "tasks").text)
        first = text_of("log")
        wait.until(lambda b: len(b.find_element(By.ID, "log").text) > len(first))  # it grows by itself
        shot = os.environ.get("CELER_DASHBOARD_SCREENSHOT")
        if shot:
            time.sleep(0.5)
            browser.save_screenshot(shot)

        # A finished job: SUCCEEDED, its exit code, and its whole log when chosen.
        submit("--submission-id", "short", "--follow", "--", driver, "run", "2")
        wait.until(lambda b: "SUCCEEDED" in b.find_element(By.CSS_SELECTOR, "#jobs tr[data-job='short']").text)
        wait.until(lambda b: b.find_element(By.CSS_SELECTOR, "#jobs tr[data-job='short']").click() or True)
        wait.until(lambda b: "step 2: 4, counter 2" in b.find_element(By.ID, "log").text)
        cells = cells_of("#jobs tr[data-job='short']")
        assert cells[1] == "SUCCEEDED" and cells[5] == "0", cells
        # Its two tasks, listed one by one, finished.
        wait.until(lambda b: len([r for r in b.find_elements(By.CSS_SELECTOR, "#task-list tr")
                                  if "twice" in r.text and "FINISHED" in r.text]) >= 2)

        # Stopped from the command line: the page follows.
        subprocess.run([celer, "job", "stop", "ticking"], env=env, check=True, capture_output=True, timeout=60)
        wait.until(lambda b: "STOPPED" in b.find_element(By.CSS_SELECTOR, "#jobs tr[data-job='ticking']").text)
        assert text_of("problem") == "", text_of("problem")

        # Log out: back to the form, and the old page no longer loads.
        browser.find_element(By.CSS_SELECTOR, "form[action='/api/logout'] button").click()
        wait.until(ec.presence_of_element_located((By.NAME, "token")))
        browser.get(url + "/")
        wait.until(ec.presence_of_element_located((By.NAME, "token")))
        print("dashboard: passed")
        return 0
    finally:
        if browser is not None:
            browser.quit()
        subprocess.run([celer, "stop"], env=env, capture_output=True, timeout=60)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
