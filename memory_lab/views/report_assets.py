"""The report page's inline style sheet and script (``report.py`` puts them in the page: it opens
with no network)."""

CLIP_CHARS = 200  # a probe's text longer than this (or of more lines) is clipped ...
CLIP_LINES = 4  # ... to this many lines (CSS), with the whole text a click away

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI","Noto Sans CJK KR","Noto Sans KR",
"Apple SD Gothic Neo","Malgun Gothic",NanumGothic,sans-serif;margin:2rem auto;max-width:1200px;
padding:0 1rem;color:#222;line-height:1.4}
table{border-collapse:collapse;margin:.5rem 0 1.5rem;font-size:.9rem}
th,td{border:1px solid #ddd;padding:.25rem .5rem;vertical-align:top;text-align:left}
th{background:#f3f3f3;position:sticky;top:0}
table.num td:not(:first-child):not(:nth-child(2)){text-align:right;white-space:nowrap}
.note{color:#555;font-size:.85rem;max-width:60rem}
img.chart{width:min(100%,1000px);height:auto;border:1px solid #eee}
.filters{display:flex;gap:.5rem;flex-wrap:wrap;align-items:center;margin:.5rem 0}
.filters input{min-width:20rem;padding:.2rem .4rem}
td.ok{color:#17803d;font-weight:bold;text-align:center}
td.bad{color:#b42318;font-weight:bold;text-align:center}
#headline{background:#f4f7fb;border:1px solid #d7e0ea;border-radius:6px;padding:.2rem 1rem .5rem}
#headline h2{margin:.6rem 0 .3rem}
ul.headline li{margin:.25rem 0}
#toc{font-size:.9rem;margin:.8rem 0}
#toc ol{display:flex;flex-wrap:wrap;gap:.2rem 1.6rem;padding-left:0;margin:.3rem 0;
list-style-position:inside}
.explain{background:#fff8e6;border-left:3px solid #e0a100;padding:.3rem .6rem;max-width:60rem;
font-size:.9rem}
th{cursor:pointer}
details.clip>summary{display:block;cursor:pointer;list-style:none}
details.clip>summary::-webkit-details-marker{display:none}
details.clip:not([open])>summary>span{display:-webkit-box;-webkit-box-orient:vertical;
-webkit-line-clamp:CLIP_LINES;line-clamp:CLIP_LINES;overflow:hidden}
details.clip>summary::after{content:attr(data-more);display:block;color:#1f5fa8;
font-size:.8rem;margin-top:.1rem}
details.clip[open]>summary::after{content:"▴ show less"}
details.clip.fits>summary::after{content:none}
#probes td.long{min-width:12rem}
#summary-table td:nth-child(2){text-align:right}
@media print{details.clip:not([open])>summary>span{display:inline}
details.clip>summary::after{content:none}}
th[aria-sort=ascending]::after{content:" ▲"}
th[aria-sort=descending]::after{content:" ▼"}
""".replace("CLIP_LINES", str(CLIP_LINES))

JS = """
(function(){
  var q=document.getElementById('q'),m=document.getElementById('fmemory'),
      c=document.getElementById('fcategory'),k=document.getElementById('fcorrect'),
      count=document.getElementById('count');
  if(!q){return;}
  var rows=Array.prototype.slice.call(document.querySelectorAll('#probes tbody tr'));
  function apply(){
    var text=q.value.trim().toLowerCase(),shown=0;
    rows.forEach(function(r){
      var ok=(!m.value||r.dataset.memory===m.value)&&(!c.value||r.dataset.category===c.value)
        &&(!k.value||r.dataset.correct===k.value)
        &&(!text||r.textContent.toLowerCase().indexOf(text)>=0);
      r.hidden=!ok; if(ok){shown++;}
    });
    count.textContent=shown+' of '+rows.length+' probes shown';
  }
  [q,m,c,k].forEach(function(el){el.addEventListener('input',apply);
    el.addEventListener('change',apply);});
  apply();
})();
(function(){  // a clipped text that fits in its lines anyway needs no "show all"
  var clips=Array.prototype.slice.call(document.querySelectorAll('details.clip:not([open])'));
  var fits=clips.filter(function(d){var s=d.querySelector('summary>span');
    return s.scrollHeight<=s.clientHeight+1;});  // read every size first, then write
  fits.forEach(function(d){d.classList.add('fits');});
})();
(function(){  // every table sorts by a column on a click on its header (numbers as numbers)
  function key(cell){
    var t=cell.textContent.trim(),n=parseFloat(t.replace(/[,%$+]/g,''));
    return isNaN(n)||!/^[-+0-9.,]/.test(t)?t.toLowerCase():n;
  }
  document.querySelectorAll('table').forEach(function(table){
    var heads=table.querySelectorAll('thead th');
    heads.forEach(function(th,i){th.addEventListener('click',function(){
      var down=th.getAttribute('aria-sort')==='ascending',body=table.tBodies[0];
      heads.forEach(function(h){h.removeAttribute('aria-sort');});
      th.setAttribute('aria-sort',down?'descending':'ascending');
      var rows=Array.prototype.slice.call(body.rows);
      rows.sort(function(a,b){
        var x=key(a.cells[i]),y=key(b.cells[i]);
        if(typeof x!==typeof y){x=String(x);y=String(y);}
        return (x<y?-1:x>y?1:0)*(down?-1:1);
      });
      rows.forEach(function(r){body.appendChild(r);});
    });});
  });
})();
"""
