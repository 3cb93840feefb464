"""A real S3-compatible server for the tests: moto's server mode (``moto_server``, from the
``moto[server]`` package in the test extras), on 127.0.0.1 at a free port, started by the first
test that asks and stopped with the session.

moto honours ``If-None-Match: *`` on PutObject and CompleteMultipartUpload, the conditional
writes Lance's commits rely on (``tests/indexing/test_object_store.py`` checks it). Each test gets a
bucket of its own; ``objects`` lists and reads every object under a prefix, for the forget
tests that look for a text in all of them.
"""

from __future__ import annotations

import itertools
import socket
import subprocess
import sys
import time
from pathlib import Path

import boto3

from tests.helpers import stop_process

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "esfis-test", "AWS_SECRET_ACCESS_KEY": "esfis-test", "AWS_REGION": "us-east-1"}


class S3Server:
    def __init__(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        binary = Path(sys.executable).with_name("moto_server")
        self.process = subprocess.Popen(
            [str(binary), "-H", "127.0.0.1", "-p", str(self.port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self.client = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=CREDENTIALS["AWS_REGION"],
            aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        )
        self._names = itertools.count(1)
        deadline = time.monotonic() + 60
        while True:
            try:
                self.client.list_buckets()
                return
            except Exception:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("moto_server did not start") from None
                time.sleep(0.1)

    @property
    def env(self) -> dict[str, str]:
        """What a process needs to reach this server: Lance's object store reads these."""
        return {**CREDENTIALS, "AWS_ENDPOINT_URL": self.endpoint, "AWS_ALLOW_HTTP": "true"}

    def bucket(self) -> str:
        name = f"esfis-test-{next(self._names)}"
        self.client.create_bucket(Bucket=name)
        return name

    def objects(self, bucket: str, prefix: str = "") -> dict[str, bytes]:
        """Every object under ``prefix``, read whole."""
        found: dict[str, bytes] = {}
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                found[item["Key"]] = self.client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
        return found

    def stop(self) -> None:
        stop_process(self.process, timeout=10)


SERVER: S3Server | None = None


def server() -> S3Server:
    global SERVER
    if SERVER is None:
        SERVER = S3Server()
    return SERVER


def stop() -> None:
    global SERVER
    if SERVER is not None:
        SERVER.stop()
        SERVER = None
