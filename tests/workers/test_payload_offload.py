"""Large payloads go to the artifact store (External Storage) and the codec server shows them."""

from __future__ import annotations

import base64
import dataclasses
import urllib.request

from google.protobuf import json_format
from temporalio.api.common.v1 import Payloads
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import ExternalStorage

from sleuth.runtime.artifacts import default_artifact_store
from sleuth.workers.codec import AESGCMCodec, new_key
from sleuth.workers.codec_server import CodecServer
from sleuth.workers.payload_storage import ArtifactStorageDriver, resolve, stored_reference


async def test_the_codec_server_shows_an_offloaded_encrypted_payload() -> None:
    codec = AESGCMCodec([base64.b64decode(new_key())])
    converter = dataclasses.replace(
        pydantic_data_converter,
        payload_codec=codec,
        external_storage=ExternalStorage(
            drivers=[ArtifactStorageDriver()], payload_size_threshold=1024
        ),
    )
    value = "evidence " * 1000
    [offloaded] = await converter.encode([value])
    [small] = await converter.encode(["short"])
    ref = stored_reference(offloaded)
    assert ref is not None and stored_reference(small) is None
    assert offloaded.ByteSize() < 1024, "only the reference is in the payload"
    # The store holds the codec's output: ciphertext, not the value.
    assert b"evidence" not in default_artifact_store().get_bytes(ref)
    assert resolve(offloaded).metadata["encoding"] == b"binary/encrypted"

    server = CodecServer("127.0.0.1", 0, codec, ["http://localhost:8233"])
    server.start_in_thread()
    try:
        body = json_format.MessageToJson(Payloads(payloads=[offloaded, small])).encode()
        request = urllib.request.Request(
            f"{server.url}/decode", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            decoded = json_format.Parse(response.read(), Payloads())
    finally:
        server.shutdown()
        server.server_close()
    plain = pydantic_data_converter.payload_converter.to_payloads([value, "short"])
    assert list(decoded.payloads) == plain
