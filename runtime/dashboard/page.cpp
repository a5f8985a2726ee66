// The dashboard page: plain HTML, CSS and JavaScript in one string (no files to install, no
// scripts from elsewhere). It polls /api/state twice a second.
#include "dashboard/dashboard.hpp"

namespace dynapar::dashboard {

const std::string& page_html() {
  static const std::string page = R"HTML(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>dynapar</title>
<style>
body{font:14px system-ui,sans-serif;margin:16px;color:#222;background:#fafafa}
h1{font-size:18px;margin:0 0 8px}
.bar{display:flex;gap:18px;flex-wrap:wrap;margin-bottom:12px}
.kpi{background:#fff;border:1px solid #ddd;border-radius:6px;padding:6px 10px}
.kpi b{display:block;font-size:16px}
.group{display:flex;align-items:center;gap:6px;margin:6px 0}
.glabel{width:150px;font-weight:600}
.stage{border:1px solid #555;border-radius:4px;padding:4px 8px;background:#dbe7f5}
.arrow{color:#777}
.share{height:10px;background:#4e79a7;border-radius:3px}
table{border-collapse:collapse;background:#fff}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}
th{background:#eee}
#events{font:12px monospace;background:#fff;border:1px solid #ddd;height:180px;overflow:auto;padding:6px;white-space:pre}
section{margin-bottom:14px}
</style></head><body>
<h1>dynapar: <span id="job">waiting for the run</span></h1>
<div class="bar">
 <div class="kpi">progress<b id="step">-</b></div>
 <div class="kpi">step time<b id="steptime">-</b></div>
 <div class="kpi">throughput<b id="rate">-</b></div>
 <div class="kpi">loss<b id="loss">-</b></div>
 <div class="kpi">ETA<b id="eta">-</b></div>
 <div class="kpi">cost / budget<b id="cost">-</b></div>
 <div class="kpi">cost queue<b id="queue">-</b></div>
 <div class="kpi">plan changes / faults<b id="changes">-</b></div>
</div>
<section><h2 style="font-size:15px">Plan in force <span id="planbrief" style="font-weight:normal;color:#555"></span></h2>
<div id="plan"></div></section>
<section><h2 style="font-size:15px">Devices</h2><table id="devices"><thead><tr>
<th>device</th><th>name</th><th>state</th><th>speed (job)</th><th>compute s (last step)</th><th>wait s</th><th>price/h</th></tr></thead>
<tbody></tbody></table></section>
<section><h2 style="font-size:15px">Events</h2><div id="events"></div></section>
<script>
function fmt(x,d){return (typeof x==='number')?x.toFixed(d):'-';}
function clock(s){if(typeof s!=='number')return '-';s=Math.round(s);const h=Math.floor(s/3600),m=Math.floor(s/60)%60,x=s%60;
 return (h?h+':'+String(m).padStart(2,'0'):m)+':'+String(x).padStart(2,'0');}
function render(s){
 document.getElementById('job').textContent=(s.job||'?')+' ('+(s.model||'?')+')'+(s.done?' - finished':'');
 document.getElementById('step').textContent='step '+(s.step||0)+' / '+(s.steps||'?');
 document.getElementById('steptime').textContent=fmt(1000*(s.step_time_s||0),1)+' ms';
 document.getElementById('rate').textContent=fmt(s.samples_per_s,0)+' samples/s';
 document.getElementById('loss').textContent=fmt(s.loss,4);
 document.getElementById('eta').textContent=clock(s.eta_s);
 document.getElementById('cost').textContent=fmt(s.avg_cost,5)+' / '+(typeof s.budget==='number'?fmt(s.budget,5):'none');
 document.getElementById('queue').textContent=fmt(s.cost_queue,2);
 document.getElementById('changes').textContent=(s.plan_changes||0)+' / '+(s.faults||0);
 document.getElementById('planbrief').textContent=s.plan_brief||'';
 const plan=document.getElementById('plan');plan.innerHTML='';
 const batch=s.batch||1;
 (s.plan||[]).forEach((g,i)=>{
  const row=document.createElement('div');row.className='group';
  const lab=document.createElement('div');lab.className='glabel';
  lab.innerHTML='group '+i+'<br><small>share '+g.share+' ('+Math.round(100*g.share/batch)+' %), u='+g.micro_batch+'</small>';
  const bar=document.createElement('div');bar.className='share';bar.style.width=Math.max(4,Math.round(120*g.share/batch))+'px';
  lab.appendChild(bar);row.appendChild(lab);
  g.devices.forEach((d,j)=>{
   if(j){const a=document.createElement('span');a.className='arrow';a.textContent='\u2192';row.appendChild(a);}
   const st=document.createElement('div');st.className='stage';
   st.textContent='d'+d+'  layers '+g.splits[j]+'-'+(g.splits[j+1]-1);row.appendChild(st);});
  plan.appendChild(row);});
 const tb=document.querySelector('#devices tbody');tb.innerHTML='';
 (s.devices||[]).forEach(d=>{const tr=document.createElement('tr');
  [d.id,d.name||'',d.state||'',fmt(d.speed,2),fmt(d.compute_s,4),fmt(d.wait_s,4),fmt(d.price_per_hour,0)].forEach(v=>{
   const td=document.createElement('td');td.textContent=v;tr.appendChild(td);});tb.appendChild(tr);});
 document.getElementById('events').textContent=(s.events||[]).slice().reverse().join('\n');
}
async function poll(){try{const r=await fetch('/api/state'+location.search,{cache:'no-store'});render(await r.json());}catch(e){}
 setTimeout(poll,500);}
poll();
</script></body></html>
)HTML";
  return page;
}

}  // namespace dynapar::dashboard
