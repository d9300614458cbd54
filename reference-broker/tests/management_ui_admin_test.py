#!/usr/bin/python3
"""The management UI's admin pages in a real browser (headless Chromium through chromedriver, as
management_ui_test.py): users (tags, a password kept when left empty), virtual hosts, permissions, vhost and user
limits, policies (and what a policy does to a queue), the definitions' export (a download) and import (a file
upload); what each user's tags let the page show. Each action is done in the page and checked through the API.
Screenshots of each page go to SCREENSHOT_DIR.

Usage: management_ui_admin_test.py BROKER_EXECUTABLE SCREENSHOT_DIR
"""
import json, os, sys, unittest

from selenium.webdriver.common.by import By

import management_ui_support as support
from management_ui_support import BrowserTest


class ManagementUiAdminTest(BrowserTest):
    def setUp(self):
        self.logged_in()

    def whoami(self, user, password):
        return self.call("GET", "/api/whoami", user=user, password=password)[0]

    def test_users_are_added_updated_and_deleted(self):
        self.go_admin("users")
        form = "form[data-form=user]"
        self.fill(form, {"name": "ui-alice", "password": "s3cret"})
        self.click(f"{form} a[data-tag=monitoring]")
        self.click(f"{form} a[data-tag=policymaker]")
        self.submit(form, "User ui-alice saved.")
        alice = self.api("GET", "/api/users/ui-alice")
        self.assertEqual(alice["tags"], ["monitoring", "policymaker"])
        self.assertEqual(self.whoami("ui-alice", "s3cret"), 200)
        self.wait_for_text("#users-table", "ui-alice")
        # The password left empty: the user's tags change, its password stays.
        self.fill(form, {"name": "ui-alice", "tags": ""})
        self.click(f"{form} a[data-tag=management]")
        self.submit(form, "User ui-alice saved.")
        updated = self.api("GET", "/api/users/ui-alice")
        self.assertEqual((updated["tags"], updated["password_hash"]), (["management"], alice["password_hash"]))
        self.assertEqual(self.whoami("ui-alice", "s3cret"), 200)
        self.wait_for_text("#users-table", "management")
        self.screenshot("admin-users")
        # A new user without a password is refused before the API is asked.
        self.fill(form, {"name": "ui-nobody", "password": ""})
        self.submit(form, "A new user needs a password.", ok=False)
        self.assertEqual(self.call("GET", "/api/users/ui-nobody")[0], 404)
        delete = "button[data-action=delete-user][data-name=ui-alice]"
        self.click(delete)
        self.assertIn("ui-alice", self.accept_confirmation(accept=False))
        self.assertEqual(self.call("GET", "/api/users/ui-alice")[0], 200)
        self.notice_after(lambda: (self.click(delete), self.accept_confirmation()), "User ui-alice deleted.")
        self.assertEqual(self.call("GET", "/api/users/ui-alice")[0], 404)
        self.assertEqual(self.console_errors(), [])

    def test_virtual_hosts_are_added_and_deleted(self):
        self.go_admin("vhosts")
        form = "form[data-form=vhost]"
        self.fill(form, {"name": "ui-vh"})
        self.submit(form, "Virtual host ui-vh added.")
        self.assertEqual(self.call("GET", "/api/vhosts/ui-vh")[0], 200)
        self.wait_for(lambda: self.elements("#vhost-filter option[value='ui-vh']"), "the new vhost in the filter")
        self.api("PUT", "/api/vhost-limits/ui-vh/max-queues", {"value": 9})
        self.wait_for_text("#vhosts-table", "max-queues")
        self.screenshot("admin-vhosts")
        delete = "button[data-action=delete-vhost][data-name=ui-vh]"
        self.click(delete)
        self.accept_confirmation(accept=False)
        self.assertEqual(self.call("GET", "/api/vhosts/ui-vh")[0], 200)
        self.notice_after(lambda: (self.click(delete), self.accept_confirmation()), "Virtual host ui-vh deleted.")
        self.assertEqual(self.call("GET", "/api/vhosts/ui-vh")[0], 404)
        self.wait_for(lambda: not self.elements("#vhost-filter option[value='ui-vh']"), "the vhost gone from the filter")

    def test_permissions_are_set_and_cleared(self):
        self.api("PUT", "/api/vhosts/ui-perm", {})
        self.api("PUT", "/api/users/ui-bob", {"password": "b", "tags": "management"})
        self.go_admin("permissions")
        form = "form[data-form=permission]"
        self.fill(form, {"user": "ui-bob", "vhost": "ui-perm", "configure": "^ui-", "write": ".*", "read": "^ui-read"})
        self.submit(form, "Permission of ui-bob on ui-perm set.")
        permission = self.api("GET", "/api/permissions/ui-perm/ui-bob")
        self.assertEqual((permission["configure"], permission["write"], permission["read"]), ("^ui-", ".*", "^ui-read"))
        row = self.wait_for_text("#permissions", "ui-bob")
        self.assertIn("^ui-read", row)
        self.screenshot("admin-permissions")
        self.notice_after(lambda: self.click("button[data-action=clear-permission][data-user=ui-bob]"),
                          "Permission of ui-bob on ui-perm cleared.")
        self.assertEqual(self.call("GET", "/api/permissions/ui-perm/ui-bob")[0], 404)
        self.api("DELETE", "/api/users/ui-bob")
        self.api("DELETE", "/api/vhosts/ui-perm")

    def test_vhost_and_user_limits_are_set_and_cleared(self):
        self.api("PUT", "/api/vhosts/ui-lim", {})
        self.api("PUT", "/api/permissions/ui-lim/guest", {"configure": ".*", "write": ".*", "read": ".*"})
        self.api("PUT", "/api/users/ui-carol", {"password": "c", "tags": ""})
        self.go_admin("limits")
        form = "form[data-form=vhost-limit]"
        self.fill(form, {"vhost": "ui-lim", "limit": "max-queues", "value": "5"})
        self.submit(form, "Limit max-queues of ui-lim set.")
        self.fill(form, {"vhost": "ui-lim", "limit": "max-connections", "value": "10"})
        self.submit(form, "Limit max-connections of ui-lim set.")
        self.assertEqual(self.api("GET", "/api/vhost-limits/ui-lim"),
                         [{"vhost": "ui-lim", "value": {"max-connections": 10, "max-queues": 5}}])
        # In force: the sixth queue of ui-lim is refused.
        for i in range(5):
            self.api("PUT", f"/api/queues/ui-lim/q{i}", {})
        self.assertEqual(self.call("PUT", "/api/queues/ui-lim/q5", {})[0], 400)
        form = "form[data-form=user-limit]"
        self.fill(form, {"user": "ui-carol", "value": "3"})
        self.submit(form, "Limit max-connections of ui-carol set.")
        self.assertEqual(self.api("GET", "/api/user-limits/ui-carol"), [{"user": "ui-carol", "value": {"max-connections": 3}}])
        self.wait_for_text("#user-limits", "ui-carol")
        self.wait_for_text("#vhost-limits", "max-queues")
        self.screenshot("admin-limits")
        self.notice_after(lambda: self.click("button[data-action=clear-limit][data-name=ui-lim][data-limit=max-queues]"),
                          "Limit max-queues of ui-lim cleared.")
        self.assertEqual(self.api("GET", "/api/vhost-limits/ui-lim"), [{"vhost": "ui-lim", "value": {"max-connections": 10}}])
        self.assertEqual(self.call("PUT", "/api/queues/ui-lim/q5", {})[0], 201)
        self.notice_after(lambda: self.click("button[data-action=clear-limit][data-name=ui-carol]"),
                          "Limit max-connections of ui-carol cleared.")
        self.assertEqual(self.api("GET", "/api/user-limits/ui-carol"), [])
        self.api("DELETE", "/api/vhosts/ui-lim")
        self.api("DELETE", "/api/users/ui-carol")

    def refused_policy(self, form, path, name, key, value, reason):
        """The policy form sent with a key the API refuses: its reason shown, and no policy `name` at `path`."""
        self.fill(form, {"name": name})
        self.add_argument(form, "definition", key, value)
        self.submit(form, reason, ok=False)
        self.assertEqual(self.call("GET", path + name)[0], 404)

    def test_policies_are_set_apply_to_queues_and_are_deleted(self):
        self.api("PUT", "/api/queues/%2F/ui-pol-q", {})
        self.go_admin("policies")
        form = "form[data-form=policy]"
        self.fill(form, {"vhost": "/", "name": "ui-cap", "pattern": "^ui-pol", "apply-to": "queues", "priority": "3"})
        self.add_argument(form, "definition", "max-length", "2", hint="max-length")
        self.submit(form, "Policy ui-cap set in /.")
        policy = self.api("GET", "/api/policies/%2F/ui-cap")
        self.assertEqual((policy["pattern"], policy["apply-to"], policy["priority"], policy["definition"]),
                         ("^ui-pol", "queues", 3, {"max-length": 2}))
        queue = self.api("GET", "/api/queues/%2F/ui-pol-q")
        self.assertEqual((queue["policy"], queue["effective_policy_definition"]), ("ui-cap", {"max-length": 2}))
        self.wait_for_text("#policies-table", "ui-cap")
        self.screenshot("admin-policies")
        # A key this broker does not have: the API's reason, shown.
        self.refused_policy(form, "/api/policies/%2F/", "ui-bad", "ha-mode", "all", "ha-mode")
        delete = "button[data-action=delete-policy][data-name=ui-cap]"
        self.click(delete)
        self.accept_confirmation(accept=False)
        self.assertEqual(self.call("GET", "/api/policies/%2F/ui-cap")[0], 200)
        self.notice_after(lambda: (self.click(delete), self.accept_confirmation()), "Policy ui-cap deleted.")
        self.assertEqual(self.call("GET", "/api/policies/%2F/ui-cap")[0], 404)
        self.assertEqual(self.api("GET", "/api/queues/%2F/ui-pol-q")["policy"], "")
        self.api("DELETE", "/api/queues/%2F/ui-pol-q")

    def test_operator_policies_are_set_cap_queues_and_are_deleted(self):
        self.api("PUT", "/api/queues/%2F/ui-op-q", {"arguments": {"x-max-length": 10}})
        self.go_admin("operator-policies")
        form = "form[data-form=policy][data-kind=operator-policies]"
        self.fill(form, {"vhost": "/", "name": "ui-op-cap", "pattern": "^ui-op", "priority": "1"})
        self.add_argument(form, "definition", "max-length", "4", hint="max-length")
        self.submit(form, "Operator policy ui-op-cap set in /.")
        policy = self.api("GET", "/api/operator-policies/%2F/ui-op-cap")
        self.assertEqual((policy["pattern"], policy["apply-to"], policy["definition"]), ("^ui-op", "queues", {"max-length": 4}))
        queue = self.api("GET", "/api/queues/%2F/ui-op-q")
        self.assertEqual((queue["operator_policy"], queue["effective_policy_definition"]), ("ui-op-cap", {"max-length": 4}))
        self.wait_for_text("#operator-policies-table", "ui-op-cap")
        self.screenshot("admin-operator-policies")
        # A key an operator policy may not have: the API's reason, shown.
        self.refused_policy(form, "/api/operator-policies/%2F/", "ui-op-bad", "alternate-exchange", "x",
                            "not allowed in an operator policy")
        delete = "button[data-action=delete-policy][data-kind=operator-policies][data-name=ui-op-cap]"
        self.notice_after(lambda: (self.click(delete), self.accept_confirmation()), "Operator policy ui-op-cap deleted.")
        self.assertEqual(self.call("GET", "/api/operator-policies/%2F/ui-op-cap")[0], 404)
        self.assertEqual(self.api("GET", "/api/queues/%2F/ui-op-q")["operator_policy"], "")
        self.api("DELETE", "/api/queues/%2F/ui-op-q")

    def test_definitions_are_exported_and_imported(self):
        self.api("PUT", "/api/users/ui-exported", {"password": "e", "tags": "monitoring"})
        self.api("PUT", "/api/queues/%2F/ui-exported-q", {"durable": True})
        self.go_admin("definitions")
        message = self.notice_after(lambda: self.click("button[data-action=export-definitions]"), "Definitions exported")
        path = self.downloaded("firemq-definitions-*.json")
        self.assertIn(os.path.basename(path), message)
        with open(path) as f:
            exported = json.load(f)
        self.assertIn("ui-exported", [u["name"] for u in exported["users"]])
        self.assertIn("ui-exported-q", [q["name"] for q in exported["queues"]])
        self.assertEqual(exported, self.api("GET", "/api/definitions"))

        upload = os.path.join(self.temp.name, "ui-import.json")
        with open(upload, "w") as f:
            json.dump({"vhosts": [{"name": "ui-imported-vh"}],
                       "permissions": [{"user": "guest", "vhost": "ui-imported-vh", "configure": ".*", "write": ".*", "read": ".*"}],
                       "queues": [{"name": "ui-imported-q", "vhost": "ui-imported-vh", "durable": True,
                                   "auto_delete": False, "arguments": {"x-max-length": 7}}],
                       "policies": [{"vhost": "/", "name": "ui-imported-policy", "pattern": "^nothing$",
                                     "apply-to": "queues", "priority": 0, "definition": {"max-length": 1}}]}, f)
        form = "form[data-form=import-definitions]"
        self.element(f"{form} input[name=file]").send_keys(upload)
        self.submit(form, "Definitions imported from ui-import.json.")
        self.assertEqual(self.call("GET", "/api/vhosts/ui-imported-vh")[0], 200)
        self.assertEqual(self.api("GET", "/api/queues/ui-imported-vh/ui-imported-q")["arguments"], {"x-max-length": 7})
        self.assertEqual(self.api("GET", "/api/policies/%2F/ui-imported-policy")["definition"], {"max-length": 1})
        self.wait_for(lambda: self.elements("#vhost-filter option[value='ui-imported-vh']"), "the imported vhost in the filter")
        self.screenshot("admin-definitions")
        # A file that is not JSON, and definitions the broker refuses: each said, nothing imported.
        broken = os.path.join(self.temp.name, "broken.json")
        with open(broken, "w") as f:
            f.write("{not json")
        self.element(f"{form} input[name=file]").send_keys(broken)
        self.submit(form, "broken.json is not JSON", ok=False)
        refused = os.path.join(self.temp.name, "refused.json")
        with open(refused, "w") as f:
            json.dump({"topic_permissions": [{"user": "guest", "vhost": "/", "exchange": "x", "write": ".*", "read": ".*"}]}, f)
        self.element(f"{form} input[name=file]").send_keys(refused)
        self.submit(form, "topic_permissions", ok=False)
        self.api("DELETE", "/api/vhosts/ui-imported-vh")
        self.api("DELETE", "/api/policies/%2F/ui-imported-policy")
        self.api("DELETE", "/api/queues/%2F/ui-exported-q")
        self.api("DELETE", "/api/users/ui-exported")

    def test_what_each_tag_shows(self):
        for name, tag in (("ui-watch", "monitoring"), ("ui-manage", "management")):
            self.api("PUT", f"/api/users/{name}", {"password": "p", "tags": tag})
            self.api("PUT", f"/api/permissions/%2F/{name}", {"configure": ".*", "write": ".*", "read": ".*"})
        # Monitoring: the node's figures, no admin pages.
        self.log_in("ui-watch", "p")
        self.element("#node-fds")
        self.assertFalse(self.driver.find_element(By.ID, "nav-admin").is_displayed())
        # Management: neither.
        self.log_in("ui-manage", "p")
        self.wait_for_text("#node", "for administrator and monitoring users")
        self.assertFalse(self.driver.find_element(By.ID, "nav-admin").is_displayed())
        # Deleted while logged in: the next refresh finds the credentials refused, and the login says so.
        self.api("DELETE", "/api/users/ui-manage")
        self.assertEqual(self.wait_for_text("#login-error", "Login failed"), "Login failed")
        self.log_in()
        self.assertTrue(self.driver.find_element(By.ID, "nav-admin").is_displayed())
        self.api("DELETE", "/api/users/ui-watch")


if __name__ == "__main__":
    support.main(sys.argv)
