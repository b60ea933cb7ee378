-- Wireshark / tshark dissector for openlink link traces (docs/spec.md section 7).
--
-- Traces are classic pcap files with link type 147 (LINKTYPE_USER0). Each record is a 12-byte
-- pseudo-header (which link and direction) followed by one data-link packet or control flit as its
-- transmitter sent it (docs/spec.md sections 2.2 and 2.3). A packet's transaction-layer header is the
-- simulated GPUs' own (docs/spec.md section 7.1): opcode, destination, source, multicast and offset.
--
--   tshark -X lua_script:tools/wireshark/openlink.lua -r trace.pcap -V
--   wireshark -X lua_script:tools/wireshark/openlink.lua trace.pcap
--
-- or copy this file into Wireshark's personal plugins folder.

local openlink = Proto("openlink", "openlink link trace")

local record_kinds = { [1] = "packet", [2] = "control flit" }
local vcs = { [0] = "request", [1] = "posted", [2] = "response", [3] = "snoop" }
local control_kinds = { [1] = "Update", [2] = "NAK", [3] = "InitFC1", [4] = "InitFC2", [5] = "Ident",
    [6] = "PM_Enter_L1", [7] = "PM_Request_Ack" }
-- The simulator's opcodes (docs/spec.md section 7.1).
local sim_opcodes = {
    [0x01] = "traffic write", [0x02] = "data", [0x03] = "partial sum", [0x04] = "result",
    [0x05] = "tree credit", [0x08] = "ld_reduce", [0x09] = "engine read", [0x0A] = "read answer",
    [0x0B] = "sum", [0x0F] = "returned",
}
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
f.control = ProtoField.uint8("openlink.control", "Control kind", base.DEC, control_kinds)
f.credits = ProtoField.uint16("openlink.credits", "Credits")
f.ident_port = ProtoField.uint8("openlink.ident.port", "Sender's port")
f.ident_node = ProtoField.uint64("openlink.ident.node", "Sender's node ID", base.HEX)
f.crc = ProtoField.uint32("openlink.crc", "CRC-32C", base.HEX)
f.payload = ProtoField.bytes("openlink.payload", "Payload")

-- The 96-bit word W of a flit (bytes 0-11, big-endian) as its top 32 bits and low 64 bits.
local function word(tvb)
    return tvb(0, 4):uint(), tvb(4, 8):uint64()
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
        dl:add_le(f.crc, flit(12, 4))
        if flit:len() > 16 then
            top:add(f.payload, flit(16))
        end
        local to = multicast == 1 and string.format("group %d", dest) or tostring(dest)
        pinfo.cols.info = string.format("%s seq %d ack %d, %s %d -> %s, offset %Xh, %d payload flits",
            vcs[vc], seq, bit.band(bit.rshift(hi, 4), 0x3FF), what, source, to, offset, flits)
    elseif kind == 2 and control == 5 then
        -- Ident (docs/spec.md section 2.3): the sender's port and node ID.
        dl:add(f.control, flit(0, 1), control)
        dl:add(f.ident_port, flit(1, 1))
        dl:add(f.ident_node, flit(4, 8))
        dl:add_le(f.crc, flit(12, 4))
        pinfo.cols.info = string.format("Ident node %s port %d", tostring(lo:tohex()), flit(1, 1):uint())
    elseif kind == 2 then
        dl:add(f.control, flit(0, 1), control)
        for i = 0, 3 do
            dl:add(f.credits, flit(4 + 2 * i, 2))
        end
        dl:add_le(f.crc, flit(12, 4))
        pinfo.cols.info = string.format("%s ack %d", control_kinds[control] or "control",
            bit.band(bit.rshift(hi, 4), 0x3FF))
    end
    return tvb:len()
end

local encap = wtap_encaps and wtap_encaps.USER0 or wtap.USER0
DissectorTable.get("wtap_encap"):add(encap, openlink)
