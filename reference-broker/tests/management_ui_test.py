#!/usr/bin/python3
"""The management UI in a real browser: headless Chromium driven through chromedriver (Debian's chromium,
chromium-driver and python3-selenium). Logs in with the broker's users, sees on the overview and the connections
page a FireMQ connection that this test opened (with its client map), drills down into a queue and deletes it,
and checks that the page logged no console error. Screenshots of each page go to SCREENSHOT_DIR.

Usage: management_ui_test.py BROKER_EXECUTABLE SCREENSHOT_DIR
"""
import base64, json, os, socket, sys, tempfile, unittest, urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

import transports_test as transports
from transports_test import Broker, StreamClient, HELLO, WELCOME, make_certificates

SCREENSHOTS = None


class ManagementUiTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.temp = tempfile.TemporaryDirectory()
        make_certificates(cls.temp.name)
        cls.broker = Broker(cls.temp.name, definitions={
            "users": [{"name": "guest", "password": "guest", "tags": ["administrator"]}],
            "vhosts": [{"name": "/"}], "permissions": [{"user": "guest", "vhost": "/"}]})
        cls.base = f"http://127.0.0.1:{cls.broker.ports['ws']}"
        options = webdriver.ChromeOptions()
        options.binary_location = "/usr/bin/chromium"
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1366,900"):
            options.add_argument(flag)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        cls.driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
        cls.wait = WebDriverWait(cls.driver, 15)

    @classmethod
    def tearDownClass(cls):
        cls.driver.quit()
        cls.broker.stop()
        cls.temp.cleanup()

    def api(self, method, path, body=None):
        request = urllib.request.Request(self.base + path, method=method,
                                         data=json.dumps(body).encode() if body is not None else None)
        request.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=5) as response:
            text = response.read().decode()
            return json.loads(text) if text.strip() else None

    def screenshot(self, name):
        os.makedirs(SCREENSHOTS, exist_ok=True)
        self.driver.save_screenshot(os.path.join(SCREENSHOTS, name + ".png"))

    def text_of(self, css):
        return self.wait.until(EC.visibility_of_element_located((By.CSS_SELECTOR, css))).text

    def test_login_see_a_connection_and_delete_a_queue(self):
        client = StreamClient(socket.create_connection(("127.0.0.1", self.broker.ports["fire"]), timeout=5))
        client.sock.sendall(b"FMQ1")
        client.send(0x01, dict(HELLO, client={"product": "ui-test-client", "version": "9.9"}))
        op, welcome = client.receive()
        self.assertEqual(op, WELCOME)
        self.api("PUT", "/api/queues/%2F/ui-test-queue", {"durable": False})
        self.api("POST", "/api/exchanges/%2F/amq.default/publish", {"routing_key": "ui-test-queue", "payload": "m"})

        d = self.driver
        d.get(self.base + "/")
        self.wait.until(EC.visibility_of_element_located((By.ID, "user"))).send_keys("guest")
        d.find_element(By.ID, "password").send_keys("wrong")
        d.find_element(By.ID, "login-button").click()
        self.assertIn("Login failed", self.text_of("#login-error"))
        self.screenshot("1-login-refused")
        self.assertEqual(d.find_element(By.ID, "user").get_attribute("value"), "guest")  # kept after a failure
        d.find_element(By.ID, "password").send_keys("guest")
        d.find_element(By.ID, "login-button").click()

        # The overview counts the connection this test opened, and the queue's message.
        self.wait.until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, "#total-connections .value"), "1"))
        self.assertEqual(self.text_of("#total-ready .value"), "1")
        self.screenshot("2-overview")

        d.find_element(By.CSS_SELECTOR, "nav button[data-view=connections]").click()
        row = self.wait.until(EC.visibility_of_element_located((By.CSS_SELECTOR, "tr.connection"))).text
        self.assertIn(welcome["conn_id"], row)
        self.assertIn("ui-test-client", row)
        self.screenshot("3-connections")

        # A client chose this name: shown as text, it must not become markup or script (no alert opens).
        hostile = 'ui-x" onmouseover="alert(1)"><img src=x onerror=alert(2)>'
        self.api("PUT", "/api/queues/%2F/" + urllib.request.quote(hostile, safe=""), {})
        d.find_element(By.CSS_SELECTOR, "nav button[data-view=queues]").click()
        link = self.wait.until(EC.visibility_of_element_located((By.XPATH, "//a[starts-with(@data-queue, 'ui-x')]")))
        self.assertEqual((link.text, link.get_attribute("data-queue")), (hostile, hostile))
        self.assertEqual(d.find_elements(By.CSS_SELECTOR, "main img"), [])
        webdriver.ActionChains(d).move_to_element(link).perform()
        with self.assertRaises(NoAlertPresentException):
            d.switch_to.alert.text
        self.api("DELETE", "/api/queues/%2F/" + urllib.request.quote(hostile, safe=""))
        self.wait.until(EC.element_to_be_clickable((By.CSS_SELECTOR, "a[data-queue='ui-test-queue']"))).click()
        self.wait.until(EC.element_to_be_clickable((By.ID, "delete-queue")))
        self.screenshot("4-queue")
        d.find_element(By.ID, "delete-queue").click()
        self.wait.until(EC.alert_is_present()).accept()
        self.wait.until(EC.visibility_of_element_located((By.CSS_SELECTOR, "nav button.active[data-view=queues]")))
        self.wait.until(lambda driver: not driver.find_elements(By.CSS_SELECTOR, "a[data-queue='ui-test-queue']"))
        self.assertNotIn("ui-test-queue", [q["name"] for q in self.api("GET", "/api/queues")])
        self.screenshot("5-queue-deleted")

        # 401s from the wrong password are the test's own; anything else the page logged is an error.
        errors = [e for e in d.get_log("browser")
                  if e["level"] == "SEVERE" and "401" not in e["message"]]
        self.assertEqual(errors, [])
        client.sock.close()


if __name__ == "__main__":
    transports.BROKER = sys.argv.pop(1)
    SCREENSHOTS = sys.argv.pop(1)
    unittest.main(verbosity=2)
