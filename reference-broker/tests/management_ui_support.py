"""What the management UI's browser tests share (management_ui_test.py, management_ui_admin_test.py): a broker of
their own, headless Chromium driven through chromedriver (Debian's chromium, chromium-driver and python3-selenium),
the API beside the browser to check what each form did, and explicit waits: a verdict never rests on a sleep.

Every action in the UI ends with a notice (#notice-text) given after the API answered, so a test clicks, waits for
the notice, then asks the API what changed.
"""
import base64, glob, json, os, socket, statistics, tempfile, time, unittest, urllib.error, urllib.request

from selenium import webdriver
from selenium.common.exceptions import (ElementClickInterceptedException, StaleElementReferenceException,
                                        TimeoutException)
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

import transports_test as transports
from transports_test import Broker, StreamClient, HELLO, WELCOME, make_certificates

SCREENSHOTS = None  # set from the command line: where each page's screenshot goes

# Every listener on a free port, AMQP's too (the channels page shows AMQP channels).
LISTENERS = ["--port", "0", "--tls-port", "0", "--ws-port", "0", "--wss-port", "0", "--amqp-port", "0",
             "--amqps-port", "off",
             # The broker's rate history sampled every second, so that the charts have points within seconds.
             "--collect-statistics-interval-ms", "1000"]


def main(argv):
    """BROKER SCREENSHOT_DIR [unittest arguments]"""
    global SCREENSHOTS
    transports.BROKER = argv.pop(1)
    SCREENSHOTS = argv.pop(1)
    unittest.main(argv=argv, verbosity=2)


class BrowserTest(unittest.TestCase):
    DEFINITIONS = {"users": [{"name": "guest", "password": "guest", "tags": ["administrator"]}],
                   "vhosts": [{"name": "/"}, {"name": "dev"}],
                   "permissions": [{"user": "guest", "vhost": "/"}, {"user": "guest", "vhost": "dev"}]}

    @classmethod
    def setUpClass(cls):
        cls.temp = tempfile.TemporaryDirectory()
        make_certificates(cls.temp.name)
        cls.broker = Broker(cls.temp.name, definitions=cls.DEFINITIONS, listeners=LISTENERS)
        cls.base = f"http://127.0.0.1:{cls.broker.ports['ws']}"
        cls.downloads = os.path.join(cls.temp.name, "downloads")
        os.makedirs(cls.downloads)
        options = webdriver.ChromeOptions()
        options.binary_location = "/usr/bin/chromium"
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1366,900"):
            options.add_argument(flag)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        cls.driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
        cls.driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": cls.downloads})
        # Generous: CI runs these beside other tests and a background build on two cores, where the page's
        # refreshes and the broker's one-second samples come late; a passing wait returns as soon as it holds.
        cls.wait = WebDriverWait(cls.driver, 45, poll_frequency=0.05, ignored_exceptions=[StaleElementReferenceException])

    @classmethod
    def tearDownClass(cls):
        cls.driver.quit()
        cls.broker.stop()
        cls.temp.cleanup()

    # The API, beside the browser ----------------------------------------------------------------------------------

    def call(self, method, path, body=None, user="guest", password="guest"):
        """(status, parsed JSON or None) of one request."""
        request = urllib.request.Request(self.base + path, method=method,
                                         data=json.dumps(body).encode() if body is not None else None)
        request.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, text = response.status, response.read().decode()
        except urllib.error.HTTPError as e:
            status, text = e.code, e.read().decode()
        return status, json.loads(text) if text.strip() else None

    def api(self, method, path, body=None):
        """The answer of a request that must succeed."""
        status, answer = self.call(method, path, body)
        self.assertLess(status, 300, f"{method} {path}: {status} {answer}")
        return answer

    def fire_client(self, client_map, vhost="/"):
        """A FireMQ connection over fire://, logged in as guest with `client_map` as hello's client map."""
        client = StreamClient(socket.create_connection(("127.0.0.1", self.broker.ports["fire"]), timeout=5))
        client.sock.sendall(b"FMQ1")
        client.send(0x01, dict(HELLO, client=client_map, vhost=vhost))
        op, welcome = client.receive()
        self.assertEqual(op, WELCOME, welcome)
        return client, welcome

    def pika(self, **client_properties):
        import pika
        return pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", self.broker.ports["amqp"], "/", pika.PlainCredentials("guest", "guest"),
            client_properties=client_properties, connection_attempts=1, socket_timeout=5, heartbeat=0))

    # The browser -------------------------------------------------------------------------------------------------

    def element(self, css, within=None):
        """The visible element `css` names, once there is one."""
        return self.wait.until(EC.visibility_of_element_located((By.CSS_SELECTOR, css)))

    def elements(self, css):
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def text_of(self, css):
        return self.element(css).text

    def wait_for(self, condition, message=""):
        try:
            return self.wait.until(lambda driver: condition())
        except TimeoutException:
            self.fail("timed out waiting: " + message)

    def wait_for_text(self, css, fragment):
        self.wait.until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, css), fragment))
        return self.driver.find_element(By.CSS_SELECTOR, css).text

    def row_containing(self, css, fragment):
        """The text of the first of the rows `css` names that contains `fragment`, once there is one."""
        def found(driver):
            return next((row.text for row in driver.find_elements(By.CSS_SELECTOR, css) if fragment in row.text), False)
        return self.wait.until(found)

    def click(self, css):
        """Clicks what `css` names; a region the refresh just redrew is found again."""
        def clicked(driver):
            try:
                element = driver.find_element(By.CSS_SELECTOR, css)
                driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
                if not element.is_displayed() or not element.is_enabled():
                    return False
                element.click()
                return True
            except (StaleElementReferenceException, ElementClickInterceptedException):
                return False
            except Exception as e:  # not there yet
                if "no such element" in str(e):
                    return False
                raise
        self.wait.until(clicked)

    def accept_confirmation(self, accept=True):
        """The confirmation dialog the last click opened: its text, after accepting or dismissing it."""
        alert = self.wait.until(EC.alert_is_present())
        message = alert.text
        alert.accept() if accept else alert.dismiss()
        return message

    def open_details(self, form_css):
        """Opens the collapsible panel holding `form_css`, if it is closed, once the page has the form."""
        self.wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, form_css)))
        self.driver.execute_script(
            "const form = document.querySelector(arguments[0]); const d = form && form.closest('details'); if (d && !d.open) d.querySelector('summary').click();",
            form_css)
        return self.element(form_css)

    def fill(self, form_css, values):
        """Types or selects each value into the form's field of that name."""
        form = self.open_details(form_css)
        for name, value in values.items():
            field = form.find_element(By.NAME, name)
            if field.tag_name == "select":
                Select(field).select_by_value(value)
            else:
                field.clear()
                field.send_keys(value)
        return form

    def add_argument(self, form_css, editor, key, value, type_=None, hint=None):
        """One row of an arguments editor: through its hint link (which fills key and type) or typed."""
        form = self.element(form_css)
        if hint:
            form.find_element(By.CSS_SELECTOR, f"a[data-action=add-arg][data-args={editor}][data-key='{hint}']").click()
        rows = form.find_elements(By.CSS_SELECTOR, f".args[data-args={editor}] .arg-row")
        row = [r for r in rows if r.find_element(By.NAME, "arg-key").get_attribute("value") in ("", key)][0]
        if not hint:
            row.find_element(By.NAME, "arg-key").send_keys(key)
        row.find_element(By.NAME, "arg-value").send_keys(value)
        if type_:
            Select(row.find_element(By.NAME, "arg-type")).select_by_value(type_)

    def dismiss_notice(self):
        self.driver.execute_script("const a = document.querySelector('#notice a[data-action=dismiss]'); if (a) a.click();")
        self.wait.until(lambda driver: not driver.find_elements(By.ID, "notice-text"))

    def notice_after(self, act, fragment, ok=True):
        """Clears the notice, does `act`, then waits for the notice that says `fragment` (an error's when not ok)."""
        self.dismiss_notice()
        act()
        text = self.wait_for_text("#notice-text", fragment)
        kind = self.driver.find_element(By.CSS_SELECTOR, "#notice > div").get_attribute("class")
        self.assertEqual(kind, "ok" if ok else "failed", text)
        return text

    def submit(self, form_css, fragment, ok=True):
        return self.notice_after(lambda: self.element(form_css).find_element(By.CSS_SELECTOR, "button[type=submit]").click(),
                                 fragment, ok)

    def go(self, view):
        """A tab of the top navigation."""
        self.click(f"nav button[data-view={view}]")
        self.element(f"nav button.active[data-view={view}]")

    def go_admin(self, page):
        self.go("admin")
        self.click(f".subnav button[data-admin={page}]")
        self.element(f".subnav button.active[data-admin={page}]")

    def open_login(self):
        """The login form of a fresh page: logged out, nothing kept."""
        self.driver.get(self.base + "/")
        self.driver.execute_script("sessionStorage.clear(); localStorage.clear();")
        self.driver.refresh()
        return self.element("#user")

    def log_in(self, user="guest", password="guest", refresh="1000"):
        self.open_login().send_keys(user)
        self.driver.find_element(By.ID, "password").send_keys(password)
        self.driver.find_element(By.ID, "login-button").click()
        self.element("nav button.active[data-view=overview]")
        # Refreshed every second, so that the charts have samples soon; every wait below is explicit.
        Select(self.element("#refresh-every")).select_by_value(refresh)

    def logged_in(self):
        if not self.elements("#nav:not([hidden])") or not self.elements("#who a#logout"):
            self.log_in()

    def choose_vhost(self, vhost):
        """The vhost filter in the header ("" is every vhost)."""
        Select(self.element("#vhost-filter")).select_by_value(vhost)

    def screenshot(self, name, full_page=True):
        """The page, as tall as its content (at most 2,400 pixels), to SCREENSHOTS/NAME.png."""
        os.makedirs(SCREENSHOTS, exist_ok=True)
        path = os.path.join(SCREENSHOTS, name + ".png")
        if not full_page:
            self.driver.save_screenshot(path)
            return path
        size = self.driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
        shot = self.driver.execute_cdp_cmd("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 2400), "scale": 1}})
        with open(path, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        return path

    def console_errors(self):
        """What the page logged as errors: a script error, a refused inline script or style (CSP), a 5xx. The 4xx
        answers the tests cause on purpose (a wrong password, a refused form) are the API's, shown in the page."""
        return [e for e in self.driver.get_log("browser")
                if e["level"] == "SEVERE" and "the server responded with a status of 4" not in e["message"]]

    def downloaded(self, pattern):
        """The path of a finished download matching `pattern`, once there is one."""
        def finished(driver):
            done = [p for p in glob.glob(os.path.join(self.downloads, pattern)) if not p.endswith(".crdownload")]
            return done[0] if done and not glob.glob(os.path.join(self.downloads, "*.crdownload")) else False
        return self.wait.until(finished)
