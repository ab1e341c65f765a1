import subprocess, re, sys, os
R=os.path.expanduser('~/.cache/rcclfix/toolchains/debian-sid/rootfs')
GENS={'G9':['gfx900','gfx90a','gfx942','gfx950','gfx803'],'G10':['gfx1010','gfx1030'],'G11':['gfx1100','gfx1151'],'G12':['gfx1200','gfx1201']}
def words(ws):
    return ','.join('0x%02x'%b for w in ws for b in w.to_bytes(4,'little'))
def probe1(mcpu, insts):
    lines=[]
    for ws in insts:
        lines.append(words(ws)); lines.append(words([0xBF800000]))
    p=subprocess.run(['bwrap','--ro-bind',R,'/','--dev','/dev','--proc','/proc','--tmpfs','/tmp','llvm-mc-21','-arch=amdgcn','-mcpu='+mcpu,'--disassemble'],input='\n'.join(lines)+'\n',capture_output=True,text=True)
    out=[l.strip() for l in p.stdout.splitlines() if l.strip() and not l.strip().startswith('.')]
    res=[];cur=None
    for l in out:
        if l.startswith('s_nop'):
            res.append(cur);cur=None
        else: cur=l
    if len(res)!=len(insts):
        return None
    return res
def probe(mcpu, insts):
    out=[]
    for i in range(0,len(insts),64):
        r=probe1(mcpu,insts[i:i+64])
        if r is None:
            r=[]
            for one in insts[i:i+64]:
                x=probe1(mcpu,[one])
                r.append(x[0] if x else None)
        out.extend(r)
    return out
def width(text,base,prefixes='vsa'):
    m=re.search(r'(?<![\w:])[%s]\[(%d):(\d+)\]'%(prefixes,base),text)
    if m: return int(m.group(2))-base+1
    if re.search(r'(?<![\w:])[%s]%d(?![\d\w])'%(prefixes,base),text): return 1
    return 0
def code(w): return 0 if w==0 else 1 if w==1 else 2 if w==2 else 3
def table(gen,packed):
    n=128 if packed else 1024
    insts=[]
    for op in range(n):
        if packed:
            w0=((0x1A7<<23) if gen=='G9' else (0xCC<<24))|(op<<16)|10
        else:
            w0=(((0x34 if gen=='G9' else 0x35))<<26)|(op<<16)|10
        for w1 in [(256+20)|((256+30)<<9)|((256+40)<<18), (256+20)|((256+30)<<9), (256+20), 20|(30<<9)|(40<<18), 20|(30<<9), 20, 20|((256+30)<<9)|((256+40)<<18), 20|((256+30)<<9), (256+20)|(30<<9), (256+20)|(30<<9)|((256+40)<<18)]:
            insts.append([w0,w1])
    ent=[0]*n
    for mcpu in GENS[gen]:
        res=probe(mcpu,insts)
        if res is None: continue
        alones=[probe(mcpu,[[insts[k][1]]])[0] for k in range(10)]
        for j,t in enumerate(res):
            op=j//10
            if t is None or t==alones[j%10]: continue
            mn,_,ops=t.partition(' ')
            e=ent[op]|(1<<10)
            for k,b in enumerate([20,30,40]):
                c=code(width(ops,b))
                e=(e&~(3<<(2*k)))|(max((e>>(2*k))&3,c)<<(2*k))
            dv=width(ops,10,'va'); ds=width(ops,10,'s')
            if ds or 'vcc' in ops.split(',')[0] or ops.split(',')[0].strip() in ('null','exec','exec_lo'): e|=1<<6
            dc=max(code(dv),code(ds),(e>>7)&3)
            e=(e&~(3<<7))|(dc<<7)
            parts=[p.strip() for p in ops.split(',')]
            if 'cmpx' in mn: e|=1<<11
            if mn.startswith('v_div_fmas'): e|=1<<12
            ent[op]=e
        # A VOP3b carry-out is bits 14:8 of the first word: set them to 6 and see s6 or s[6:7]
        # come out as the second operand (a VOP3a op reads those bits as modifiers).
        if not packed:
            extra=[[w0|(6<<8),w1] for op in range(n)
                   for w0 in [(((0x34 if gen=='G9' else 0x35))<<26)|(op<<16)|10]
                   for w1 in [(256+20)|((256+30)<<9), (256+20)|((256+30)<<9)|((256+40)<<18)]]
            for j,t in enumerate(probe(mcpu,extra)):
                if t is None: continue
                parts=[p.strip() for p in t.partition(' ')[2].split(',')]
                if len(parts)>1 and parts[1] in ('s6','s[6:7]'): ent[j//2]|=1<<9
    return ent
out=['//! Operand use of every VOP3 and VOP3P opcode, per generation, as llvm-mc 21 disassembles probe\n//! encodings (`python3 xtask/vop3_table.py src/scan/callgraph/vop3_table.rs` in a machine with\n//! the debian-sid toolchain; do not edit). Per opcode: bits 0-1, 2-3, 4-5 the width code of\n//! src0, src1, src2 (0 unused, 1 one register, 2 two, 3 up to 16); bit 6 the destination is\n//! scalar; bits 7-8 its width code; bit 9 a scalar carry-out (VOP3b); bit 10 llvm decodes it;\n//! bit 11 it writes exec (`v_cmpx_*`); bit 12 it reads vcc without naming it (`v_div_fmas_*`).']
for gen in GENS:
    for packed in (False,True):
        t=table(gen,packed)
        name=('VOP3P_' if packed else 'VOP3_')+gen
        out.append('pub(super) static %s: [u16; %d] = ['%(name,len(t)))
        for i in range(0,len(t),16):
            out.append('    '+', '.join('0x%04x'%x for x in t[i:i+16])+',')
        out.append('];')
        print(name, sum(1 for x in t if x&(1<<10)), file=sys.stderr)
open(sys.argv[1],'w').write('\n'.join(out)+'\n')
