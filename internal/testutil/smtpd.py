"""SMTP server for coffer's tests: aiosmtpd's Controller in its own process.

Every message it accepts is written to --dir as NNNN.json (envelope: the
MAIL FROM, RCPT TOs, the user who authenticated, whether the session was
encrypted, and the message as received), renamed into place before the
server answers 250, so a client that got 250 finds the file. It prints
"ready" once it listens and exits when its standard input closes (the
test ended or died).

    coffer-aiosmtpd-python smtpd.py --listen 127.0.0.1:PORT --dir DIR
        [--tls starttls|implicit --cert FILE --key FILE]
        [--user NAME --password-file FILE] [--reject-rcpt ADDRESS]
"""
import argparse
import itertools
import json
import os
import ssl
import sys

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword


class Recorder:
    def __init__(self, directory, reject):
        self.directory = directory
        self.reject = reject
        self.counter = itertools.count(1)

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address == self.reject:
            return "550 5.1.1 mailbox unavailable"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        n = next(self.counter)
        record = {
            "mail_from": envelope.mail_from,
            "rcpt_tos": envelope.rcpt_tos,
            "auth_user": session.auth_data.login.decode() if session.auth_data else None,
            "encrypted": server.transport.get_extra_info("ssl_object") is not None,
            "data": envelope.content.decode("utf-8", "replace"),
        }
        tmp = os.path.join(self.directory, ".%04d.tmp" % n)
        with open(tmp, "w") as f:
            json.dump(record, f)
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, os.path.join(self.directory, "%04d.json" % n))
        return "250 Message accepted"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--listen", required=True)
    p.add_argument("--dir", required=True)
    p.add_argument("--tls", choices=["none", "starttls", "implicit"], default="none")
    p.add_argument("--cert")
    p.add_argument("--key")
    p.add_argument("--user")
    p.add_argument("--password-file")
    p.add_argument("--reject-rcpt")
    a = p.parse_args()
    host, port = a.listen.rsplit(":", 1)

    context = None
    if a.tls != "none":
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(a.cert, a.key)

    kwargs = {}
    if a.user:
        with open(a.password_file) as f:
            password = f.read().rstrip("\n")

        def authenticator(server, session, envelope, mechanism, auth_data):
            ok = (isinstance(auth_data, LoginPassword)
                  and auth_data.login.decode() == a.user
                  and auth_data.password.decode() == password)
            return AuthResult(success=ok, handled=False, auth_data=auth_data if ok else None)

        kwargs.update(authenticator=authenticator, auth_required=True)
    if a.tls == "starttls":
        kwargs.update(tls_context=context, require_starttls=True)
    controller = Controller(
        Recorder(a.dir, a.reject_rcpt), hostname=host, port=int(port),
        ssl_context=context if a.tls == "implicit" else None,
        server_hostname="coffer-test-smtp", **kwargs)
    controller.start()
    print("ready", flush=True)
    sys.stdin.read()
    controller.stop()


if __name__ == "__main__":
    main()
