#!/usr/bin/env python3
"""Converts a CTranslate2 Whisper model (faster-whisper's model.bin) into the
Hugging Face layout that candle-transformers' whisper model loads.

    whisper-convert.py CT2_DIR OUT_DIR

CT2_DIR holds model.bin, config.json and tokenizer.json; OUT_DIR gets
model.safetensors (float16, Hugging Face tensor names), config.json (the
WhisperConfig fields candle reads, taken from the weights' shapes) and
tokenizer.json. Standard library only: setup runs it with any python3.

The CT2 file (binary version 6): little-endian; u32 version, string spec
name, u32 spec revision, u32 variable count, then per variable a string
name, u8 rank, rank u32 dims, u8 dtype, u32 byte count and the bytes; then
u32 alias count and per alias two strings. A string is a u16 length
(counting a trailing NUL) and its bytes.
"""

import json
import os
import shutil
import struct
import sys

# CT2 dtype ids: name, element size.
DTYPES = {0: ("F32", 4), 1: ("I8", 1), 2: ("I16", 2), 3: ("I32", 4), 4: ("F16", 2), 5: ("BF16", 2)}


class Reader:
    def __init__(self, data):
        self.data = data
        self.pos = 0

    def take(self, n):
        if self.pos + n > len(self.data):
            raise ValueError(f"model.bin ends early (at byte {self.pos}, wanted {n} more)")
        b = self.data[self.pos : self.pos + n]
        self.pos += n
        return b

    def unpack(self, fmt):
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt)))[0]

    def string(self):
        return bytes(self.take(self.unpack("H"))).rstrip(b"\0").decode()


def read_ct2(path):
    """The variables of a CT2 model.bin: name -> (dims, dtype id, bytes)."""
    with open(path, "rb") as f:
        r = Reader(memoryview(f.read()))
    version = r.unpack("I")
    if version != 6:
        raise ValueError(f"model.bin binary version {version}, this script reads 6")
    spec = r.string()
    if spec != "WhisperSpec":
        raise ValueError(f"model.bin holds a {spec}, not a WhisperSpec")
    r.unpack("I")  # spec revision
    variables = {}
    for _ in range(r.unpack("I")):
        name = r.string()
        dims = [r.unpack("I") for _ in range(r.unpack("B"))]
        dtype = r.unpack("B")
        size = r.unpack("I")
        if dtype not in DTYPES:
            raise ValueError(f"{name}: unknown dtype id {dtype}")
        count = 1
        for d in dims:
            count *= d
        if count * DTYPES[dtype][1] != size:
            raise ValueError(f"{name}: {size} bytes for dims {dims}")
        variables[name] = (dims, dtype, r.take(size))
    for _ in range(r.unpack("I")):
        alias, target = r.string(), r.string()
        variables.setdefault(alias, variables[target])
    if r.pos != len(r.data):
        raise ValueError(f"{len(r.data) - r.pos} bytes left over after the aliases")
    return variables


def convert(variables):
    """(Hugging Face name, dims, bytes) for every tensor candle loads, and a
    few it does not (the encoder's positions) that Hugging Face has."""
    out = []

    def get(name, dtype=4):
        dims, got, data = variables[name]
        if got != dtype:
            raise ValueError(f"{name}: dtype id {got}, expected {dtype}")
        return dims, data

    def put(hf, ct2):
        dims, data = get(ct2)
        out.append((hf, dims, data))

    def split(hf_names, ct2, drop_zero_bias=None):
        """A fused projection (rows stacked: q,k,v or k,v) cut into its parts;
        Whisper's key projection has no bias (CT2 stores zeros)."""
        for part in ("weight", "bias"):
            dims, data = get(f"{ct2}/{part}")
            n = len(hf_names)
            rows = dims[0] // n
            step = len(data) // n
            for i, hf in enumerate(hf_names):
                chunk = data[i * step : (i + 1) * step]
                if part == "bias" and hf == drop_zero_bias:
                    halves = struct.unpack(f"<{len(chunk) // 2}H", chunk)
                    if any(h & 0x7FFF for h in halves):  # +0 or -0 only
                        raise ValueError(f"{ct2}/bias: the key's part is not zero")
                    continue
                out.append((f"{hf}.{part}", [rows] + dims[1:], chunk))

    def linear(hf, ct2):
        put(f"{hf}.weight", f"{ct2}/weight")
        put(f"{hf}.bias", f"{ct2}/bias")

    def norm(hf, ct2):
        put(f"{hf}.weight", f"{ct2}/gamma")
        put(f"{hf}.bias", f"{ct2}/beta")

    def layers(side):
        n = 0
        while f"{side}/layer_{n}/ffn/linear_0/weight" in variables:
            n += 1
        return n

    enc_layers, dec_layers = layers("encoder"), layers("decoder")
    if enc_layers == 0 or dec_layers == 0:
        raise ValueError("no encoder or decoder layers in model.bin")

    e = "model.encoder"
    linear(f"{e}.conv1", "encoder/conv1")
    linear(f"{e}.conv2", "encoder/conv2")
    put(f"{e}.embed_positions.weight", "encoder/position_encodings/encodings")
    for i in range(enc_layers):
        hf, ct = f"{e}.layers.{i}", f"encoder/layer_{i}"
        split([f"{hf}.self_attn.{p}_proj" for p in "qkv"], f"{ct}/self_attention/linear_0",
              drop_zero_bias=f"{hf}.self_attn.k_proj")
        linear(f"{hf}.self_attn.out_proj", f"{ct}/self_attention/linear_1")
        norm(f"{hf}.self_attn_layer_norm", f"{ct}/self_attention/layer_norm")
        linear(f"{hf}.fc1", f"{ct}/ffn/linear_0")
        linear(f"{hf}.fc2", f"{ct}/ffn/linear_1")
        norm(f"{hf}.final_layer_norm", f"{ct}/ffn/layer_norm")
    norm(f"{e}.layer_norm", "encoder/layer_norm")

    d = "model.decoder"
    put(f"{d}.embed_tokens.weight", "decoder/embeddings/weight")
    put(f"{d}.embed_positions.weight", "decoder/position_encodings/encodings")
    for i in range(dec_layers):
        hf, ct = f"{d}.layers.{i}", f"decoder/layer_{i}"
        split([f"{hf}.self_attn.{p}_proj" for p in "qkv"], f"{ct}/self_attention/linear_0",
              drop_zero_bias=f"{hf}.self_attn.k_proj")
        linear(f"{hf}.self_attn.out_proj", f"{ct}/self_attention/linear_1")
        norm(f"{hf}.self_attn_layer_norm", f"{ct}/self_attention/layer_norm")
        linear(f"{hf}.encoder_attn.q_proj", f"{ct}/attention/linear_0")
        split([f"{hf}.encoder_attn.{p}_proj" for p in "kv"], f"{ct}/attention/linear_1",
              drop_zero_bias=f"{hf}.encoder_attn.k_proj")
        linear(f"{hf}.encoder_attn.out_proj", f"{ct}/attention/linear_2")
        norm(f"{hf}.encoder_attn_layer_norm", f"{ct}/attention/layer_norm")
        linear(f"{hf}.fc1", f"{ct}/ffn/linear_0")
        linear(f"{hf}.fc2", f"{ct}/ffn/linear_1")
        norm(f"{hf}.final_layer_norm", f"{ct}/ffn/layer_norm")
    norm(f"{d}.layer_norm", "decoder/layer_norm")

    def heads(side):
        dims, data = get(f"{side}/num_heads", dtype=2)
        return struct.unpack("<h", bytes(data))[0]

    vocab, d_model = get("decoder/embeddings/weight")[0]
    config = {
        "model_type": "whisper",
        "architectures": ["WhisperForConditionalGeneration"],
        "num_mel_bins": get("encoder/conv1/weight")[0][1],
        "max_source_positions": get("encoder/position_encodings/encodings")[0][0],
        "d_model": d_model,
        "encoder_attention_heads": heads("encoder"),
        "encoder_layers": enc_layers,
        "encoder_ffn_dim": get("encoder/layer_0/ffn/linear_0/weight")[0][0],
        "vocab_size": vocab,
        "max_target_positions": get("decoder/position_encodings/encodings")[0][0],
        "decoder_attention_heads": heads("decoder"),
        "decoder_layers": dec_layers,
        "decoder_ffn_dim": get("decoder/layer_0/ffn/linear_0/weight")[0][0],
        "activation_function": "gelu",
        "scale_embedding": False,
        "tie_word_embeddings": True,
        "torch_dtype": "float16",
    }
    return out, config


def write_safetensors(path, tensors):
    """The safetensors format by hand: a u64 header length, the JSON header
    (padded with spaces to 8 bytes), then the tensors' bytes back to back."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, dims, data in tensors:
        if name in header:
            raise ValueError(f"{name} twice")
        header[name] = {"dtype": "F16", "shape": dims, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, _, data in tensors:
            f.write(data)
    os.replace(tmp, path)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: whisper-convert.py CT2_DIR OUT_DIR")
    src, dst = sys.argv[1], sys.argv[2]
    tensors, config = convert(read_ct2(os.path.join(src, "model.bin")))
    with open(os.path.join(src, "config.json")) as f:
        ct2_config = json.load(f)
    # Tokens never sampled (symbols, speaker tags, task tokens) and tokens
    # not sampled first (a space, end of text): the model's own lists.
    config["suppress_tokens"] = ct2_config.get("suppress_ids", [])
    config["begin_suppress_tokens"] = ct2_config.get("suppress_ids_begin", [])
    with open(os.path.join(src, "tokenizer.json")) as f:
        added = {t["content"]: t["id"] for t in json.load(f)["added_tokens"]}
    config["bos_token_id"] = config["eos_token_id"] = config["pad_token_id"] = added["<|endoftext|>"]
    config["decoder_start_token_id"] = added["<|startoftranscript|>"]
    os.makedirs(dst, exist_ok=True)
    write_safetensors(os.path.join(dst, "model.safetensors"), tensors)
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    shutil.copyfile(os.path.join(src, "tokenizer.json"), os.path.join(dst, "tokenizer.json"))
    print(f"{len(tensors)} tensors, {config['vocab_size']} tokens, d_model {config['d_model']}")


if __name__ == "__main__":
    main()
