-- envcut.lua: prepended to the scripts that return envelopes cut to a
-- bounded prefix for listings (peek_cut.lua, xrange_cut.lua), so that a
-- listing of large payloads never sends them whole.
--
-- An envelope (internal/wire) is the magic byte 0xD5, a version (1, or 2
-- with a deadline), varint-framed attempt, creation time, deadline
-- (version 2) and headers (a count, then length-prefixed keys and
-- values), then the payload to the end. The payload being last, the
-- envelope cut anywhere after its headers still decodes
-- (wire.UnmarshalEnvelope) to every field and the payload's first bytes.
-- These functions find where the payload starts. They are more lenient
-- than the Go decoder (they check no value, only the framing), never
-- stricter: an envelope they cannot frame is one the decoder refuses too,
-- so cutting it short changes nothing but the bytes shown of it.

-- ENVCUT_MAX_HEADERS is wire's maxHeaders: the decoder refuses more.
local ENVCUT_MAX_HEADERS = 4096

-- payload_at returns the position (1-based) in s of the first payload byte
-- of the envelope that starts at position i of s (#s + 1 for an empty
-- payload), or nil when s holds no envelope that can be framed there.
local function payload_at(s, i)
  local n = #s
  if n < i + 1 or string.byte(s, i) ~= 0xD5 then
    return nil
  end
  local version = string.byte(s, i + 1)
  if version ~= 1 and version ~= 2 then
    return nil
  end
  local p = i + 2
  -- varint reads the varint at p (at most 10 bytes, as Go's) and moves p
  -- past it; nil when it runs past the end or is longer.
  local function varint()
    local x, mul = 0, 1
    for k = 0, 9 do
      local b = string.byte(s, p + k)
      if b == nil then
        return nil
      end
      if b < 128 then
        p = p + k + 1
        return x + b * mul
      end
      x = x + (b - 128) * mul
      mul = mul * 128
    end
    return nil
  end
  local fields = 2 -- attempt, created
  if version == 2 then
    fields = 3 -- and the deadline
  end
  for _ = 1, fields do
    if varint() == nil then
      return nil
    end
  end
  local count = varint()
  if count == nil or count > ENVCUT_MAX_HEADERS then
    return nil
  end
  for _ = 1, count * 2 do -- a key, then its value
    local len = varint()
    if len == nil or len > n - p + 1 then
      return nil
    end
    p = p + len
  end
  return p
end

-- envcut returns s cut to keep the envelope that starts at position i of
-- s whole up to its payload and at most max bytes of the payload; when s
-- holds no envelope that can be framed there, s cut to i - 1 + max bytes.
local function envcut(s, i, max)
  local p = payload_at(s, i)
  if p == nil then
    p = i
  end
  if #s <= p - 1 + max then
    return s
  end
  return string.sub(s, 1, p - 1 + max)
end
