-- Wireshark / tshark dissector for openlink link traces (docs/spec.md section 7).
--
-- Traces are classic pcap files with link type 147 (LINKTYPE_USER0). Each record is a 12-byte
-- pseudo-header (which link and direction) followed by one data-link packet or control flit as its
-- transmitter sent it (docs/spec.md sections 2.2 and 2.3), or, in a trace of what a receiver took, as
-- it arrived, or a run of units the receiver discarded while it found a packet boundary again. The pseudo-header's byte 10 says how a
-- packet's transaction-layer header is laid out: the simulated GPUs' own (section 7.1: opcode,
-- destination, source, multicast and offset; `linkctl sim`), the transaction layer's (section 3, with
-- the request extension flit and coherence messages; `linkctl tl copy`, `link decode --tl transaction`),
-- or none, the field being a number (`linkctl link run` numbers its packets there).
--
--   tshark -X lua_script:tools/wireshark/openlink.lua -r trace.pcap -V
--   wireshark -X lua_script:tools/wireshark/openlink.lua trace.pcap
--
-- or copy this file into Wireshark's personal plugins folder.

local openlink = Proto("openlink", "openlink link trace")

local record_kinds = { [1] = "packet", [2] = "control flit", [3] = "discarded units" }
local RECORD_DISCARDED = 3
local vcs = { [0] = "request", [1] = "posted", [2] = "response", [3] = "snoop" }
local control_kinds = { [1] = "Update", [2] = "NAK", [3] = "InitFC1", [4] = "InitFC2", [5] = "Ident",
    [6] = "PM_Enter_L1", [7] = "PM_Request_Ack" }
-- The simulator's opcodes (docs/spec.md section 7.1).
local sim_opcodes = {
    [0x01] = "traffic write", [0x02] = "data", [0x03] = "partial sum", [0x04] = "result",
    [0x05] = "tree credit", [0x08] = "ld_reduce", [0x09] = "engine read", [0x0A] = "read answer",
    [0x0B] = "sum", [0x0F] = "returned",
}
-- The transaction layer's opcodes (docs/spec.md sections 3.1 and 3.9).
local txn_opcodes = {
    [0x01] = "PostedWrite", [0x02] = "PostedWritePartial", [0x03] = "Message", [0x08] = "Read",
    [0x09] = "Write", [0x0A] = "FetchAdd", [0x0B] = "Swap", [0x0C] = "CompareSwap", [0x10] = "Completion",
    [0x18] = "coherence request", [0x19] = "snoop", [0x1A] = "snoop response",
    [0x1B] = "snoop response with data", [0x1C] = "GO", [0x1D] = "GO with data", [0x1E] = "write-back",
}
local message_codes = { [0x01] = "doorbell", [0x02] = "interrupt", [0x7F] = "vendor-defined" }
local statuses = { [0] = "success", [1] = "unsupported request", [2] = "completer abort", [3] = "poisoned" }
-- Coherence messages' codes, per opcode (section 3.9).
local coherence_codes = {
    [0x18] = { [0] = "RdCurr", [1] = "RdShared", [2] = "RdAny", [3] = "RdOwn", [4] = "CleanEvict",
        [5] = "DirtyEvict" },
    [0x19] = { [0] = "SnpData", [1] = "SnpInv", [2] = "SnpCur" },
    [0x1A] = { [0] = "RspIHitI", [1] = "RspIHitSE", [2] = "RspSHitSE", [3] = "RspVHitV" },
    [0x1B] = { [0] = "RspIFwdM", [1] = "RspSFwdM", [2] = "RspVFwdV" },
    [0x1C] = { [0] = "GO-I", [1] = "GO-S", [2] = "GO-E", [3] = "GO-M", [4] = "GO_WritePull" },
    [0x1D] = { [0] = "GO-I with data", [1] = "GO-S with data", [2] = "GO-E with data", [3] = "GO-M with data" },
    [0x1E] = { [0] = "write-back data" },
}
local layouts = { [0] = "the simulator's (section 7.1)", [1] = "the transaction layer's (section 3)",
    [2] = "none (a number)" }
local LAYOUT_SIM, LAYOUT_TXN, LAYOUT_RAW = 0, 1, 2
local groups = { [62] = "every GPU behind the switch", [63] = "the switch's collective engine" }
local OP_TREE_CREDIT, OP_RETURNED = 0x05, 0x0F

local f = openlink.fields
f.version = ProtoField.uint8("openlink.version", "Pseudo-header version")
f.record = ProtoField.uint8("openlink.record", "Record", base.DEC, record_kinds)
f.trunk = ProtoField.uint16("openlink.trunk", "Link (trunk)")
f.from_node = ProtoField.uint16("openlink.from_node", "From node")
f.to_node = ProtoField.uint16("openlink.to_node", "To node")
f.from_port = ProtoField.uint8("openlink.from_port", "From port")
f.to_port = ProtoField.uint8("openlink.to_port", "To port")
f.kind = ProtoField.uint8("openlink.kind", "Flit kind", base.DEC, { [1] = "packet header", [2] = "control" })
f.flits = ProtoField.uint8("openlink.flits", "Payload flits")
f.vc = ProtoField.uint8("openlink.vc", "Virtual channel", base.DEC, vcs)
f.seq = ProtoField.uint16("openlink.seq", "Sequence number")
f.ack = ProtoField.uint16("openlink.ack", "Acknowledged sequence number")
f.credit_vc = ProtoField.uint8("openlink.credit_vc", "Credit channel", base.DEC, vcs)
f.credit = ProtoField.uint8("openlink.credit", "Credit (flits freed, mod 256)")
f.tl = ProtoField.uint64("openlink.tl", "Transaction-layer header", base.HEX)
f.opcode = ProtoField.uint8("openlink.tl.opcode", "Opcode", base.HEX, sim_opcodes)
f.dest = ProtoField.uint16("openlink.tl.dest", "Destination endpoint")
f.group = ProtoField.uint16("openlink.tl.group", "Multicast group", base.DEC, groups)
f.source = ProtoField.uint16("openlink.tl.source", "Source endpoint")
f.multicast = ProtoField.uint8("openlink.tl.multicast", "Multicast", base.DEC, { [0] = "no", [1] = "yes" })
f.offset = ProtoField.uint32("openlink.tl.offset", "Offset", base.HEX)
f.returned_opcode = ProtoField.uint8("openlink.tl.returned_opcode", "Returned packet's opcode", base.HEX,
    sim_opcodes)
f.credit_tree = ProtoField.uint8("openlink.tl.credit.tree", "Tree")
f.credit_direction = ProtoField.uint8("openlink.tl.credit.direction", "Direction", base.DEC,
    { [0] = "up (partial sums)", [1] = "down (results)" })
f.credit_count = ProtoField.uint32("openlink.tl.credit.count", "Chunk slots freed")
f.layout = ProtoField.uint8("openlink.layout", "Transaction-layer layout", base.DEC, layouts)
f.number = ProtoField.uint64("openlink.tl.number", "Number")
f.txn_opcode = ProtoField.uint8("openlink.txn.opcode", "Opcode", base.HEX, txn_opcodes)
f.txn_dest = ProtoField.uint16("openlink.txn.dest", "Destination endpoint")
f.txn_address = ProtoField.uint64("openlink.txn.address", "Local address of the first data flit", base.HEX)
f.txn_message = ProtoField.uint8("openlink.txn.message", "Message", base.HEX, message_codes)
f.txn_index = ProtoField.uint16("openlink.txn.index", "Index (doorbell, vector or vendor)")
f.txn_completer = ProtoField.uint16("openlink.txn.completer", "Completer")
f.txn_tag = ProtoField.uint16("openlink.txn.tag", "Tag")
f.txn_status = ProtoField.uint8("openlink.txn.status", "Status", base.DEC, statuses)
f.txn_offset = ProtoField.uint16("openlink.txn.offset", "Offset of the first data byte")
f.txn_has_data = ProtoField.uint8("openlink.txn.has_data", "Data follows", base.DEC, { [0] = "no", [1] = "yes" })
f.txn_length = ProtoField.uint16("openlink.txn.length", "Data bytes")
f.txn_enabled = ProtoField.uint8("openlink.txn.enabled_bytes", "Bytes enabled")
f.txn_first_enabled = ProtoField.uint8("openlink.txn.first_enabled", "First byte enabled")
f.txn_operand = ProtoField.uint64("openlink.txn.operand", "Operand", base.HEX)
f.txn_compare = ProtoField.uint64("openlink.txn.compare", "Expected value (CompareSwap)", base.HEX)
f.coh_code = ProtoField.uint8("openlink.txn.coh.code", "Code")
f.coh_message = ProtoField.string("openlink.txn.coh.message", "Message")
f.coh_source = ProtoField.uint16("openlink.txn.coh.source", "Source endpoint")
f.coh_phase = ProtoField.uint8("openlink.txn.coh.phase", "Phase")
f.coh_line = ProtoField.uint32("openlink.txn.coh.line", "Line (local address bits 34:6)", base.HEX)
f.ext_requester = ProtoField.uint16("openlink.txn.ext.requester", "Requester")
f.ext_tag = ProtoField.uint16("openlink.txn.ext.tag", "Tag")
f.ext_first_byte = ProtoField.uint8("openlink.txn.ext.first_byte", "First byte (address bits 3:0)")
f.ext_length = ProtoField.uint16("openlink.txn.ext.length", "Length in bytes")
f.ext_value = ProtoField.uint64("openlink.txn.ext.value", "Value", base.HEX)
f.control = ProtoField.uint8("openlink.control", "Control kind", base.DEC, control_kinds)
f.credits = ProtoField.uint16("openlink.credits", "Credits")
f.ident_port = ProtoField.uint8("openlink.ident.port", "Sender's port")
f.ident_node = ProtoField.uint64("openlink.ident.node", "Sender's node ID", base.HEX)
f.crc = ProtoField.uint32("openlink.crc", "CRC-32C", base.HEX)
f.crc_status = ProtoField.uint8("openlink.crc.status", "CRC status", base.DEC, { [0] = "bad", [1] = "good" })
local ef_bad_crc = ProtoExpert.new("openlink.crc.bad", "CRC-32C does not match: the receiver discards it",
    expert.group.CHECKSUM, expert.severity.ERROR)
f.replay = ProtoField.uint8("openlink.replay", "Replay", base.DEC,
    { [0] = "no", [1] = "yes: its sequence number was sent before on this direction" })
local ef_replay = ProtoExpert.new("openlink.replay.expert", "Replayed packet (sent again after a NAK or timeout)",
    expert.group.SEQUENCE, expert.severity.NOTE)
f.discarded_units = ProtoField.uint16("openlink.discarded.units", "Units discarded")
f.discarded_unit = ProtoField.bytes("openlink.discarded.unit", "Unit")
local ef_discarded = ProtoExpert.new("openlink.discarded", "Discarded by a receiver that lost its packet framing",
    expert.group.SEQUENCE, expert.severity.WARN)
openlink.experts = { ef_bad_crc, ef_discarded, ef_replay }

-- Replays (docs/spec.md section 7): per direction, the newest sequence number among packets whose CRC
-- checks; a packet whose CRC checks and whose number is not ahead of it (within half the 1024 numbers) is
-- sent again. An InitFC1 starts the direction's numbering over. Worked out on the first pass in frame
-- order and kept per frame for later passes.
local newest_seq = {}
local replay_of_frame = {}
function openlink.init()
    newest_seq = {}
    replay_of_frame = {}
end

local function direction_key(tvb)
    return string.format("%d:%d:%d", tvb(2, 2):uint(), tvb(4, 2):uint(), tvb(8, 1):uint())
end

-- Whether the packet with sequence number `seq` (its CRC good) in frame `pinfo` is a replay.
local function is_replay(pinfo, key, seq)
    if pinfo.visited then
        return replay_of_frame[pinfo.number] == true
    end
    local newest = newest_seq[key]
    local replay = newest ~= nil and (seq - newest) % 1024 >= 512 or newest == seq
    if not replay then
        newest_seq[key] = seq
    end
    replay_of_frame[pinfo.number] = replay
    return replay
end

-- CRC-32C (docs/spec.md section 2.6), reflected: a table of the polynomial 82F63B78h, by byte.
local crc_table = {}
for i = 0, 255 do
    local c = i
    for _ = 1, 8 do
        if bit.band(c, 1) == 1 then
            c = bit.bxor(bit.rshift(c, 1), 0x82F63B78)
        else
            c = bit.rshift(c, 1)
        end
    end
    crc_table[i] = c
end

-- Whether the CRC field (bytes 12-15, least significant byte first) of the packet or flit `flit` is the
-- CRC-32C of its other bytes: 0-11, then 16 to the end.
local function crc_good(flit)
    local c = bit.bnot(0)
    local function feed(from, to)
        for i = from, to do
            c = bit.bxor(crc_table[bit.band(bit.bxor(c, flit(i, 1):uint()), 0xFF)], bit.rshift(c, 8))
        end
    end
    feed(0, 11)
    feed(16, flit:len() - 1)
    return bit.tobit(bit.bnot(c)) == bit.tobit(flit(12, 4):le_uint())
end

-- The CRC field under `dl`, checked; whether it is good.
local function add_crc(dl, flit)
    dl:add_le(f.crc, flit(12, 4))
    local good = crc_good(flit)
    local status = dl:add(f.crc_status, flit(12, 4), good and 1 or 0)
    if not good then
        status:add_proto_expert_info(ef_bad_crc)
    end
    return good
end
f.payload = ProtoField.bytes("openlink.payload", "Payload")

-- The 96-bit word W of a flit (bytes 0-11, big-endian) as its top 32 bits and low 64 bits.
local function word(tvb)
    return tvb(0, 4):uint(), tvb(4, 8):uint64()
end

-- The simulator's header (section 7.1) under `t`; a summary for the info column.
local function simulated(t, flit, tl)
    local opcode = (tl:rshift(53)):tonumber()
    local dest = (tl:rshift(43):band(0x3FF)):tonumber()
    local source = (tl:rshift(33):band(0x3FF)):tonumber()
    local multicast = bit.band(flit(7, 1):uint(), 1)
    local offset = flit(8, 4):uint()
    -- Bytes 4-11 hold bits 63:0 of the flit's word: the opcode (bits 57:53) is in bytes 4-5, the
    -- destination (52:43) in 5-6, the source (42:33) in 6-7.
    t:add(f.opcode, flit(4, 2), opcode)
    if multicast == 1 then
        t:add(f.group, flit(5, 2), dest)
    else
        t:add(f.dest, flit(5, 2), dest)
    end
    t:add(f.source, flit(6, 2), source)
    t:add(f.multicast, flit(7, 1), multicast)
    local o = t:add(f.offset, flit(8, 4), offset)
    local what = sim_opcodes[opcode] or string.format("opcode %02Xh", opcode)
    if opcode == OP_RETURNED then
        local original = bit.rshift(offset, 27)
        o:add(f.returned_opcode, flit(8, 1), original)
        what = "returned " .. (sim_opcodes[original] or string.format("opcode %02Xh", original))
        offset = bit.band(offset, 0x07FFFFFF)
    elseif opcode == OP_TREE_CREDIT then
        o:add(f.credit_tree, flit(8, 1), bit.band(bit.rshift(offset, 26), 1))
        o:add(f.credit_direction, flit(8, 1), bit.band(bit.rshift(offset, 25), 1))
        o:add(f.credit_count, flit(8, 4), bit.band(offset, 0x01FFFFFF))
    end
    local to = multicast == 1 and string.format("group %d", dest) or tostring(dest)
    return string.format("%s %d -> %s, offset %Xh", what, source, to, offset)
end

-- Bits hi:lo of the 58-bit header `tl`, as a number (at most 32 bits wide).
local function bits(tl, hi, lo)
    return (tl:rshift(lo):band(bit.lshift(1, hi - lo + 1) - 1)):tonumber()
end

-- The request extension flit (section 3.3) at `ext` under `top`; a summary.
local function extension(top, ext)
    local x = top:add(openlink, ext, "Extension flit")
    local b0, b1, b2, b3, b4 = ext(0, 1):uint(), ext(1, 1):uint(), ext(2, 1):uint(), ext(3, 1):uint(),
        ext(4, 1):uint()
    local requester = bit.bor(bit.lshift(b0, 2), bit.rshift(b1, 6))
    local tag = bit.bor(bit.lshift(bit.band(b1, 0x3F), 4), bit.rshift(b2, 4))
    local length = bit.bor(bit.lshift(b3, 5), bit.rshift(b4, 3))
    x:add(f.ext_requester, ext(0, 2), requester)
    x:add(f.ext_tag, ext(1, 2), tag)
    x:add(f.ext_first_byte, ext(2, 1), bit.band(b2, 0xF))
    x:add(f.ext_length, ext(3, 2), length)
    x:add(f.ext_value, ext(8, 8))
    return requester, tag, bit.band(b2, 0xF), length
end

-- The transaction layer's header (sections 3.2 and 3.9) under `t`, and the extension flit a packet on the
-- request channel or a message carries; a summary for the info column.
local function transaction(t, top, flit, tl, vc, flits)
    local opcode = bits(tl, 57, 53)
    local dest = bits(tl, 52, 43)
    t:add(f.txn_opcode, flit(4, 2), opcode)
    t:add(f.txn_dest, flit(5, 2), dest)
    local name = txn_opcodes[opcode] or string.format("opcode %02Xh", opcode)
    local ext
    -- Flits are read only where the record holds them: a damaged header may claim more than it has.
    if flits > 0 and flit:len() >= 32 and (vc == 0 or opcode == 0x03) then
        ext = flit(16, 16)
    end
    if opcode == 0x10 then
        local has_data = bits(tl, 8, 8)
        local length = has_data == 1 and bits(tl, 7, 1) + 1 or 0
        t:add(f.txn_completer, flit(6, 2), bits(tl, 42, 33))
        t:add(f.txn_tag, flit(7, 2), bits(tl, 32, 23))
        t:add(f.txn_status, flit(8, 1), bits(tl, 22, 21))
        t:add(f.txn_offset, flit(8, 3), bits(tl, 20, 9))
        t:add(f.txn_has_data, flit(10, 1), has_data)
        t:add(f.txn_length, flit(11, 1), length)
        return string.format("%s to %d from %d, tag %d, %s, %d bytes at offset %d", name, dest,
            bits(tl, 42, 33), bits(tl, 32, 23), statuses[bits(tl, 22, 21)], length, bits(tl, 20, 9))
    elseif opcode == 0x03 then
        local code = bits(tl, 42, 35)
        t:add(f.txn_message, flit(6, 1), code)
        t:add(f.txn_index, flit(6, 3), bits(tl, 34, 19))
        local what = string.format("%s %s %d to %d", name, message_codes[code] or string.format("%02Xh", code),
            bits(tl, 34, 19), dest)
        if ext then
            local requester = extension(top, ext)
            what = what .. string.format(" from %d, value %s", requester, ext(8, 8):uint64():tohex())
        end
        return what
    elseif opcode >= 0x18 and opcode <= 0x1E then
        local code = bits(tl, 42, 40)
        local message = (coherence_codes[opcode] or {})[code] or string.format("%s code %d", name, code)
        t:add(f.coh_code, flit(6, 1), code)
        t:add(f.coh_message, flit(6, 1), message)
        t:add(f.coh_source, flit(6, 2), bits(tl, 39, 30))
        t:add(f.coh_phase, flit(8, 1), bits(tl, 29, 29))
        t:add(f.coh_line, flit(8, 4), bits(tl, 28, 0))
        local from = bits(tl, 39, 30)
        if ext then
            from = extension(top, ext)
        end
        return string.format("%s to %d from %d, line %Xh", message, dest, from, bits(tl, 28, 0))
    end
    -- Memory requests: the 43-bit field is the address's bits 46:4.
    local address = tl:band(UInt64.new(0xFFFFFFFF, 0x7FF)):lshift(4)
    t:add(f.txn_address, flit(6, 6), address)
    if ext then
        local requester, tag, first, length = extension(top, ext)
        local what = string.format("%s to %d, address %sh, %d bytes, requester %d tag %d", name, dest,
            address:bor(UInt64.new(first)):tohex():gsub("^0+(.)", "%1"), length, requester, tag)
        -- An atomic's operand flit (section 3.3): little-endian values of `length` (4 or 8) bytes.
        if opcode >= 0x0A and opcode <= 0x0C and flits >= 2 and flit:len() >= 48
            and (length == 4 or length == 8) then
            local o = flit(32, 16)
            local operand = o(0, length):le_uint64()
            local ops = top:add(openlink, o, "Operand flit")
            ops:add(f.txn_operand, o(0, length), operand)
            what = what .. ", operand " .. operand:tohex():sub(17 - 2 * length):upper() .. "h"
            if opcode == 0x0C then
                local compare = o(8, length):le_uint64()
                ops:add(f.txn_compare, o(8, length), compare)
                what = what .. ", expected " .. compare:tohex():sub(17 - 2 * length):upper() .. "h"
            end
        end
        return what
    end
    local what = string.format("%s to %d, address %sh", name, dest, address:tohex():gsub("^0+(.)", "%1"))
    -- A partial write's byte-enable flit (section 3.3): a 128-bit little-endian mask, bit i for byte i.
    if opcode == 0x02 and flits >= 1 and flit:len() >= 32 then
        local mask = flit(16, 16)
        local count, first = 0, nil
        for i = 0, 15 do
            local byte = mask(i, 1):uint()
            for b = 0, 7 do
                if bit.band(bit.rshift(byte, b), 1) == 1 then
                    count = count + 1
                    first = first or (8 * i + b)
                end
            end
        end
        local be = top:add(openlink, mask, "Byte-enable flit")
        be:add(f.txn_enabled, mask, count)
        if first then
            be:add(f.txn_first_enabled, mask, first)
            what = what .. string.format(", %d bytes enabled from byte %d", count, first)
        end
    end
    return what
end

function openlink.dissector(tvb, pinfo, tree)
    if tvb:len() < 12 + 16 then
        return 0
    end
    pinfo.cols.protocol = "openlink"
    local top = tree:add(openlink, tvb(), "openlink")
    local ph = top:add(openlink, tvb(0, 12), "Pseudo-header")
    ph:add(f.version, tvb(0, 1))
    ph:add(f.record, tvb(1, 1))
    ph:add(f.trunk, tvb(2, 2))
    ph:add(f.from_node, tvb(4, 2))
    ph:add(f.to_node, tvb(6, 2))
    ph:add(f.from_port, tvb(8, 1))
    ph:add(f.to_port, tvb(9, 1))
    ph:add(f.layout, tvb(10, 1))
    local layout = tvb(10, 1):uint()
    pinfo.cols.src = string.format("node %d port %d", tvb(4, 2):uint(), tvb(8, 1):uint())
    pinfo.cols.dst = string.format("node %d port %d", tvb(6, 2):uint(), tvb(9, 1):uint())

    if tvb(1, 1):uint() == RECORD_DISCARDED then
        -- Units a receiver threw away after an error until a control flit whose CRC checks (section 2.4).
        local units = math.floor((tvb:len() - 12) / 16)
        local d = top:add(openlink, tvb(12), "Discarded units")
        d:add(f.discarded_units, tvb(12), units):add_proto_expert_info(ef_discarded)
        for i = 0, units - 1 do
            d:add(f.discarded_unit, tvb(12 + 16 * i, 16))
        end
        pinfo.cols.info = string.format("[discarded] %d units while finding a packet boundary", units)
        return tvb:len()
    end
    local flit = tvb(12):tvb()
    local hi, lo = word(flit)
    local kind = bit.rshift(hi, 30)
    local dl = top:add(openlink, flit(0, 16), "Data-link header flit")
    dl:add(f.kind, flit(0, 1), kind)
    local control = bit.band(bit.rshift(hi, 24), 0x3F)
    if kind == 1 or (kind == 2 and control ~= 5) then
        dl:add(f.ack, flit(1, 3), bit.band(bit.rshift(hi, 4), 0x3FF))
    end
    if kind == 1 then
        local flits = bit.band(bit.rshift(hi, 26), 0xF)
        local vc = bit.band(bit.rshift(hi, 24), 0x3)
        local seq = bit.band(bit.rshift(hi, 14), 0x3FF)
        local credit = bit.bor(bit.lshift(bit.band(hi, 0x3), 6), (lo:rshift(58)):tonumber())
        local tl = lo:band(UInt64.new(0xFFFFFFFF, 0x03FFFFFF))
        dl:add(f.flits, flit(0, 1), flits)
        dl:add(f.vc, flit(0, 1), vc)
        dl:add(f.seq, flit(1, 2), seq)
        dl:add(f.credit_vc, flit(3, 1), bit.band(bit.rshift(hi, 2), 0x3))
        dl:add(f.credit, flit(3, 2), credit)
        local t = dl:add(f.tl, flit(4, 8), tl)
        local what
        if layout == LAYOUT_TXN then
            what = transaction(t, top, flit, tl, vc, flits)
        elseif layout == LAYOUT_RAW then
            t:add(f.number, flit(4, 8), tl)
            what = "number " .. tostring(tl)
        else
            what = simulated(t, flit, tl)
        end
        local good = add_crc(dl, flit)
        local replay = good and is_replay(pinfo, direction_key(tvb), seq)
        local r = dl:add(f.replay, flit(1, 2), replay and 1 or 0)
        if replay then
            r:add_proto_expert_info(ef_replay)
        end
        if flit:len() > 16 then
            top:add(f.payload, flit(16))
        end
        pinfo.cols.info = string.format("%s%s%s seq %d ack %d, %s, %d payload flits", good and "" or "[bad CRC] ",
            replay and "[replay] " or "", vcs[vc], seq, bit.band(bit.rshift(hi, 4), 0x3FF), what, flits)
    elseif kind == 2 and control == 5 then
        -- Ident (docs/spec.md section 2.3): the sender's port and node ID.
        dl:add(f.control, flit(0, 1), control)
        dl:add(f.ident_port, flit(1, 1))
        dl:add(f.ident_node, flit(4, 8))
        local good = add_crc(dl, flit)
        pinfo.cols.info = string.format("%sIdent node %s port %d", good and "" or "[bad CRC] ",
            tostring(lo:tohex()), flit(1, 1):uint())
    elseif kind == 2 then
        if control == 3 and crc_good(flit) and not pinfo.visited then
            -- InitFC1: the direction's sequence numbers start over.
            newest_seq[direction_key(tvb)] = nil
        end
        dl:add(f.control, flit(0, 1), control)
        for i = 0, 3 do
            dl:add(f.credits, flit(4 + 2 * i, 2))
        end
        local good = add_crc(dl, flit)
        pinfo.cols.info = string.format("%s%s ack %d", good and "" or "[bad CRC] ", control_kinds[control] or "control",
            bit.band(bit.rshift(hi, 4), 0x3FF))
    end
    return tvb:len()
end

local encap = wtap_encaps and wtap_encaps.USER0 or wtap.USER0
DissectorTable.get("wtap_encap"):add(encap, openlink)
